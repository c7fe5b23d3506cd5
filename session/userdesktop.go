package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/internal/rawjson"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// The user's own desktop: a desktop environment (host "user_device") gives
// the session's agent the computer tool as a client-side tool. Its calls
// wait in awaiting_tool_results like those of the tools the caller
// declares; the caller (the Go SDK's client/userdesktop, or `hrns desktop
// connect`) runs them on its own display, each approved by a person, and
// posts each result with the screenshot inlined as base64 (see
// postedContent), which the model then sees as an image.

// ComputerTool is the name of the computer tool, the name Anthropic's
// native computer tool must have (package desktop's ToolName).
const ComputerTool = "computer"

// UserDesktopWidth and UserDesktopHeight are the model's view of a user's
// desktop: the size the computer tool declares. The caller's screen is
// shown within it, scaled down with its aspect ratio kept (a 1920×1080
// screen is seen as 1280×720); coordinates beyond the screen's part of the
// view are refused by the caller.
const (
	UserDesktopWidth  = 1280
	UserDesktopHeight = 800
)

// computerSchema is the JSON Schema of the computer tool's arguments, for
// providers without a native computer tool: the actions and arguments of
// Anthropic's computer tool, as package desktop gives them (a test keeps
// the two the same).
const computerSchema = `{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["screenshot", "cursor_position", "mouse_move", "left_click", "right_click", "middle_click", "double_click", "triple_click", "left_mouse_down", "left_mouse_up", "left_click_drag", "scroll", "type", "key", "hold_key", "wait", "batch"],
      "description": "What to do. screenshot: see the screen. mouse_move, left_click, right_click, middle_click, double_click, triple_click: at coordinate. left_click_drag: press at start_coordinate, release at coordinate. scroll: scroll_amount wheel clicks in scroll_direction at coordinate. type: type text. key: press keys (a chord such as ctrl+s, several separated by spaces). hold_key: hold text's keys for duration seconds. wait: wait duration seconds. cursor_position: where the pointer is. batch: do actions in turn. Every action but cursor_position returns a fresh screenshot (a batch, one after its last action)."},
    "coordinate": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2, "description": "[x, y] in pixels of the screenshot."},
    "start_coordinate": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2, "description": "[x, y] where a left_click_drag starts."},
    "path": {"type": "array", "items": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}, "maxItems": 64, "description": "Points a left_click_drag passes through between start and end."},
    "text": {"type": "string", "description": "The text to type, the keys to press or hold, or the modifier keys held during a click (shift, ctrl, alt, super)."},
    "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
    "scroll_amount": {"type": "integer", "minimum": 1, "maximum": 30, "description": "Wheel clicks to scroll."},
    "duration": {"type": "number", "minimum": 0, "maximum": 30, "description": "Seconds to wait or to hold keys."},
    "safety_checks": {"type": "array", "maxItems": 8, "items": {"type": "object", "properties": {"id": {"type": "string", "maxLength": 200}, "code": {"type": "string", "maxLength": 200}, "message": {"type": "string", "maxLength": 2000}}, "required": ["id"], "additionalProperties": false},
      "description": "Leave out: set by the provider for a person to acknowledge."},
    "actions": {"type": "array", "minItems": 1, "maxItems": 16, "items": {"type": "object"}, "description": "For batch: up to 16 actions, each an object of these arguments (action, coordinate, text...), done in turn."}
  },
  "required": ["action"],
  "additionalProperties": false
}`

// userComputerTool is the client-side computer tool of a session whose
// agent has a desktop environment on the user's device: its calls wait for
// the caller, and providers with a native computer tool render it as that.
func userComputerTool(c *llm.ComputerSpec) *loop.ToolDef {
	t := loop.NewClientTool(ComputerTool, fmt.Sprintf("Use the desktop of the person who started this task, on their own computer, with the mouse and keyboard, seeing it through screenshots. "+
		"The screenshots are at most %dx%d pixels; coordinates are [x, y] pixels of the screenshot, from [0, 0] at the top left. "+
		"Take a screenshot first to see what is there; every action returns a fresh one. "+
		"The person sees each action before it runs and may refuse it.", c.Width, c.Height), json.RawMessage(computerSchema))
	t.Computer = &loop.Computer{Width: c.Width, Height: c.Height}
	return t
}

// userDesktopHost checks a desktop environment's host: hrns runs a desktop
// only on the caller's device; "" when it may be used, else why not.
func userDesktopHost(e *Environment) string {
	var host string
	if raw, ok := e.Fields["host"]; ok && !rawjson.IsNull(raw) {
		if json.Unmarshal(raw, &host) != nil {
			return `host must be "user_device"`
		}
	}
	switch host {
	case "", "user_device":
		return ""
	}
	return fmt.Sprintf(`a desktop environment runs on the caller's device here (host "user_device"), not %q: the caller runs its actions (the Go SDK's client/userdesktop, or hrns desktop connect); a sandboxed desktop on the server comes with the workstation kind`, host)
}

// checkComputer refuses a second computer tool: the agent's user desktop
// and a tool of its environments or a client tool of the same name.
func checkComputer(v *validation, sp *spec, server *loop.Toolset) {
	if sp.Computer == nil {
		return
	}
	if server != nil && slices.Contains(server.Names(), ComputerTool) {
		v.add(`the agent's desktop (host "user_device") and another of its environments both give a "computer" tool: give it one of them`, "body", "agent", "environments")
	}
	if slices.ContainsFunc(sp.ClientTools, func(t ToolDefinition) bool { return t.Name == ComputerTool }) {
		v.add(`tool "computer" is the tool of the agent's desktop environment`, "body", "agent", "tools")
	}
}

// clientNames are the names of the tools whose calls the caller answers:
// the declared tools, and the computer tool of a user's desktop.
func (sp *spec) clientNames() map[string]bool {
	client := map[string]bool{}
	for _, t := range sp.ClientTools {
		client[t.Name] = true
	}
	if sp.Computer != nil {
		client[ComputerTool] = true
	}
	return client
}

// postedContent is what the model reads of a posted tool_result, what the
// log keeps of it, and the observation events that carry its image.
//
// A result is opaque JSON, and the model reads it as text (a string as it
// is, anything else as JSON), except that an object with an "image" member
// in the shape of the reference's ImageContent ({"type": "base64",
// "media_type": "image/png", "source": BASE64}; without a media_type, the
// type its bytes read as) gives the model the image:
// the rest of the object is the text (its "text" member alone when that is
// all there is), the image follows it, and the log keeps the result
// without the image, followed by an observation_event carrying it, as for
// the screenshots of the server's own tools. msg is why such an image is
// refused ("" when it is not).
func postedContent(r json.RawMessage, req *ToolRequest) (content []llm.Part, logged json.RawMessage, obs []AgentEventData, msg string) {
	var obj map[string]json.RawMessage
	if len(r) == 0 || r[0] != '{' || json.Unmarshal(r, &obj) != nil || obj["image"] == nil || rawjson.IsNull(obj["image"]) {
		return []llm.Part{llm.TextPart(resultText(r))}, orNull(r), nil, ""
	}
	var img ImageContent
	dec := json.NewDecoder(bytes.NewReader(obj["image"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&img); err != nil {
		return nil, nil, nil, fmt.Sprintf(`an image in a result must be {"type": "base64", "media_type": ..., "source": ...}: %v`, err)
	}
	if img.Type != "base64" {
		return nil, nil, nil, `an image in a result must be inline: "type": "base64"`
	}
	if img.MediaType != "" && !postedImageType(img.MediaType) {
		return nil, nil, nil, fmt.Sprintf("an image in a result must be image/png, image/jpeg, image/gif or image/webp, not %q", img.MediaType)
	}
	if base64.StdEncoding.DecodedLen(len(img.Source)) > maxPostedImage {
		return nil, nil, nil, fmt.Sprintf("an image in a result must be at most %d bytes", maxPostedImage)
	}
	data, err := base64.StdEncoding.DecodeString(img.Source)
	if err != nil {
		return nil, nil, nil, fmt.Sprintf("an image in a result must be base64: %v", err)
	}
	if len(data) == 0 {
		return nil, nil, nil, "the image is empty: its source decodes to no bytes"
	}
	got := http.DetectContentType(data)
	if img.MediaType == "" {
		// The reference's media_type is optional: the bytes say it.
		if !postedImageType(got) {
			return nil, nil, nil, fmt.Sprintf("an image in a result must be image/png, image/jpeg, image/gif or image/webp; its bytes read as %s", got)
		}
		img.MediaType = got
	}
	if got != img.MediaType {
		return nil, nil, nil, fmt.Sprintf("the image's bytes are not %s (they read as %s)", img.MediaType, got)
	}
	if msg := checkPostedImage(img.MediaType, data); msg != "" {
		return nil, nil, nil, msg
	}
	delete(obj, "image")
	text := ""
	if t, ok := obj["text"]; ok && len(obj) == 1 {
		text = resultText(t)
	} else if len(obj) > 0 {
		b, _ := json.Marshal(obj)
		text = string(b)
	}
	logged, _ = json.Marshal(obj)
	typ := ""
	if req.ToolName == ComputerTool {
		typ = "desktop"
	}
	obs = []AgentEventData{{Kind: KindObservation, ObservationType: typ, ToolReq: req, Image: &img}}
	return []llm.Part{llm.TextPart(text), llm.ImagePart(img.MediaType, data)}, logged, obs, ""
}

// subagentDesktop is why a subagent may not have the user's desktop: its
// computer calls would wait in a child session that the caller's
// client/userdesktop.Run (or hrns desktop connect) does not follow, and
// children running at once would share one display (docs/desktop.md).
const subagentDesktop = `a subagent cannot have the user's own desktop (host "user_device"): its computer calls would wait in a child session, which the caller's client/userdesktop.Run or hrns desktop connect does not run, and subagents running at once would share one screen; give the desktop to the session's agent`

// offeredKinds lists, for messages, the environment kinds a session's
// agent may name on this server: those of [Options.Environments] and
// [Options.SessionEnvironments], and the user's own desktop, which every
// server gives.
func (m *Manager) offeredKinds() string {
	kinds := m.environmentKinds()
	switch {
	case m.hasEnvironment(envDesktop):
		return kinds
	case kinds == "none":
		return envDesktop
	}
	all := append(strings.Split(kinds, ", "), envDesktop)
	slices.Sort(all)
	return strings.Join(all, ", ")
}

// CheckAgentEnvironments checks the environments of a registered agent
// and of its inline subagents as sessions will read them: at most one
// environment of each kind, and the user's own desktop on no subagent
// (see subagentDesktop). The kinds of the API name themselves; kindOf,
// when set, gives the kind of an environment named by the id of one the
// owner registered ("" when it does not know: that one is not checked).
// Package platform/registry calls it once the names are known to resolve;
// [Manager.ParseEntry] checks what the body alone says.
//
// Errors: a *[ValidationError] at loc's environments.
func (m *Manager) CheckAgentEnvironments(a *AgentSpec, kindOf func(id string) string, loc ...any) error {
	var v validation
	m.checkAgentEnvironments(&v, a, kindOf, 0, loc...)
	return v.err()
}

func (m *Manager) checkAgentEnvironments(v *validation, a *AgentSpec, kindOf func(id string) string, depth int, loc ...any) {
	kinds := map[string]int{}
	for i, raw := range a.Environments {
		kind, named := rawjson.String(raw)
		switch {
		case !named:
			var e EnvironmentSpec
			if json.Unmarshal(raw, &e) != nil {
				continue // validateAgent says why
			}
			kind = firstNonEmpty(e.Kind, envWeb)
		case slices.Contains([]string{envWeb, envDesktop, envWorkstation, envAndroid}, kind):
			// A kind, named.
		case kindOf != nil:
			kind = kindOf(kind)
		default:
			kind = ""
		}
		if kind == "" {
			continue
		}
		if j, dup := kinds[kind]; dup {
			v.add(duplicateKind(j, kind), at(loc, "environments", i)...)
			continue
		}
		kinds[kind] = i
		if depth > 0 && kind == envDesktop && !m.hasEnvironment(envDesktop) {
			v.add(subagentDesktop, at(loc, "environments", i)...)
		}
	}
	if depth >= maxInlineDepth {
		return
	}
	for i, raw := range a.Subagents {
		if _, ok := rawjson.String(raw); ok {
			continue
		}
		var sub AgentSpec
		if json.Unmarshal(raw, &sub) == nil {
			m.checkAgentEnvironments(v, &sub, kindOf, depth+1, at(loc, "subagents", i)...)
		}
	}
}

// duplicateKind is why the environment is refused when the one at index
// first has the same kind: an agent has at most one of each kind (the
// tools of two would clash).
func duplicateKind(first int, kind string) string {
	return fmt.Sprintf("at most one environment per kind: environments[%d] is also a %q environment", first, kind)
}
