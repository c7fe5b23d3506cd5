package responses

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// OpenAI's computer use: a computer tool ([llm.ToolSpec.Computer]) is
// rendered as the computer_use_preview tool for the models trained on it
// ([ComputerUseModel]); their computer_call items become calls of that tool
// whose arguments are the neutral computer actions (those of Anthropic's
// computer tool, which the desktop package runs), and the call's result
// goes back as a computer_call_output with its screenshot.
//
// A computer call's ID is its call_id prefixed with computerCallPrefix,
// and followed by the ids of its pending safety checks, each after
// checkSeparator, so that its result, rendered on its own, is known as one
// and can acknowledge them; its Signature holds the computer_call item as
// it came (its id, action and pending safety checks), sent back as it was.
// The pending safety checks are also in the arguments (safety_checks), so
// that the tool asks a person before it runs; they are acknowledged in the
// output of a call that ran (its result has a screenshot), which only a
// person's approval lets happen.

// computerCallPrefix marks the ID of a computer call; checkSeparator comes
// before each safety check's id in it.
const (
	computerCallPrefix = "computer_"
	checkSeparator     = "__check__"
)

// computerCallID returns the ID of a computer call.
func computerCallID(callID string, checks []safetyCheck) string {
	id := computerCallPrefix + callID
	for _, c := range checks {
		id += checkSeparator + c.ID
	}
	return id
}

// splitComputerCallID returns the call_id and the safety checks' ids of a
// computer call's ID.
func splitComputerCallID(id string) (callID string, checks []string) {
	parts := strings.Split(strings.TrimPrefix(id, computerCallPrefix), checkSeparator)
	return parts[0], parts[1:]
}

// ComputerUseModel reports whether model is one of OpenAI's computer-use
// models, which take the computer_use_preview tool; other models get the
// computer tool as a function tool.
func ComputerUseModel(model string) bool {
	return strings.HasPrefix(strings.ToLower(model), "computer-use")
}

// ComputerToolModel reports whether model takes OpenAI's GA computer tool
// ({"type": "computer"}), whose calls may carry several actions (actions):
// gpt-5.4, the model OpenAI's computer use guide names, and its dated
// versions. Other models (but [ComputerUseModel]'s) get the computer tool
// as a function tool.
func ComputerToolModel(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return m == "gpt-5.4" || strings.HasPrefix(m, "gpt-5.4-20")
}

// computerSignature is what a computer call's Signature holds.
type computerSignature struct {
	Type                string          `json:"type"` // computer_call
	ID                  string          `json:"id,omitempty"`
	Action              json.RawMessage `json:"action,omitempty"`
	Actions             json.RawMessage `json:"actions,omitempty"`
	PendingSafetyChecks json.RawMessage `json:"pending_safety_checks,omitempty"`
}

// safetyCheck is one of OpenAI's pending safety checks.
type safetyCheck struct {
	ID      string `json:"id"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// openAIAction is a computer_call's action.
type openAIAction struct {
	Type    string                   `json:"type"`
	Button  string                   `json:"button"`
	X       *float64                 `json:"x"`
	Y       *float64                 `json:"y"`
	Path    []struct{ X, Y float64 } `json:"path"`
	Keys    []string                 `json:"keys"`
	Text    string                   `json:"text"`
	ScrollX float64                  `json:"scroll_x"`
	ScrollY float64                  `json:"scroll_y"`
}

// maxComputerActions bounds the actions of one computer_call read: more
// are not translated, and the call is refused saying so (the desktop runs
// at most 16 in one call).
const maxComputerActions = 64

// pixelsPerScrollClick is how many of OpenAI's scroll pixels make one wheel
// click of the neutral scroll action.
const pixelsPerScrollClick = 100

// computerArguments translates a computer_call's action into the neutral
// computer action's arguments, with the call's pending safety checks. A
// call that carries a list of actions (actions: the batched form of the
// computer tool) becomes a batch of them, done in turn with one
// screenshot after the last; a list of one is that action. An action it
// does not know becomes an action of that name, which the tool refuses
// saying so.
func computerArguments(action, actions, checks json.RawMessage) string {
	var args map[string]any
	var list []json.RawMessage
	if len(actions) > 0 && string(actions) != "null" {
		if err := json.Unmarshal(actions, &list); err != nil || len(list) == 0 {
			args = map[string]any{"action": "openai_actions_unreadable"}
		}
	}
	switch {
	case args != nil:
	case len(list) == 1:
		args = neutralAction(list[0])
	case len(list) > maxComputerActions:
		args = map[string]any{"action": "openai_too_many_actions"}
	case len(list) > 1:
		batch := make([]map[string]any, len(list))
		for i, a := range list {
			batch[i] = neutralAction(a)
		}
		args = map[string]any{"action": "batch", "actions": batch}
	default:
		args = neutralAction(action)
	}
	var cs []safetyCheck
	if json.Unmarshal(checks, &cs) == nil && len(cs) > 0 {
		args["safety_checks"] = cs
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// neutralAction translates one of OpenAI's computer actions into the
// neutral action's arguments. Keys held during a pointer action (keys, in
// the batched form) become its modifiers (text).
func neutralAction(action json.RawMessage) map[string]any {
	args := map[string]any{}
	var a openAIAction
	if err := json.Unmarshal(action, &a); err != nil {
		args["action"] = "openai_action_unreadable"
		return args
	}
	point := func() []float64 {
		if a.X == nil || a.Y == nil {
			return nil
		}
		return []float64{*a.X, *a.Y}
	}
	held := func() {
		if len(a.Keys) > 0 {
			args["text"] = strings.Join(a.Keys, "+")
		}
	}
	set := func(name string, p []float64) {
		args["action"] = name
		if p != nil {
			args["coordinate"] = p
		}
		held()
	}
	switch a.Type {
	case "screenshot":
		args["action"] = "screenshot"
	case "click":
		switch a.Button {
		case "right":
			set("right_click", point())
		case "wheel", "middle":
			set("middle_click", point())
		case "back":
			args["action"], args["text"] = "key", "alt+Left"
		case "forward":
			args["action"], args["text"] = "key", "alt+Right"
		default:
			set("left_click", point())
		}
	case "double_click":
		set("double_click", point())
	case "move":
		set("mouse_move", point())
	case "drag":
		args["action"] = "left_click_drag"
		if n := len(a.Path); n > 0 {
			args["start_coordinate"] = []float64{a.Path[0].X, a.Path[0].Y}
			args["coordinate"] = []float64{a.Path[n-1].X, a.Path[n-1].Y}
			if n > 2 {
				var mid [][]float64
				for _, p := range a.Path[1 : n-1] {
					mid = append(mid, []float64{p.X, p.Y})
				}
				args["path"] = mid
			}
		}
		held()
	case "keypress":
		args["action"], args["text"] = "key", strings.Join(a.Keys, "+")
	case "type":
		args["action"], args["text"] = "type", a.Text
	case "wait":
		args["action"], args["duration"] = "wait", 2
	case "scroll":
		dir, px := "down", a.ScrollY
		switch {
		case math.Abs(a.ScrollX) > math.Abs(a.ScrollY) && a.ScrollX > 0:
			dir, px = "right", a.ScrollX
		case math.Abs(a.ScrollX) > math.Abs(a.ScrollY):
			dir, px = "left", a.ScrollX
		case a.ScrollY < 0:
			dir = "up"
		}
		n := int(math.Round(math.Abs(px) / pixelsPerScrollClick))
		set("scroll", point())
		args["scroll_direction"], args["scroll_amount"] = dir, min(max(n, 1), 30)
	default:
		args["action"] = "openai_" + a.Type
	}
	return args
}

// computerCallItem renders a computer call back as the computer_call item
// it came as.
func computerCallItem(tc *llm.ToolCall) (item, error) {
	var sig computerSignature
	if err := json.Unmarshal([]byte(tc.Signature), &sig); err != nil || sig.Type != "computer_call" {
		return item{}, fmt.Errorf("computer call %q without its computer_call item", tc.ID)
	}
	checks := sig.PendingSafetyChecks
	if len(checks) == 0 {
		checks = json.RawMessage("[]")
	}
	callID, _ := splitComputerCallID(tc.ID)
	return item{Type: "computer_call", ID: sig.ID, CallID: callID,
		Action: sig.Action, Actions: sig.Actions, PendingSafetyChecks: checks, Status: "completed"}, nil
}

// blankPNG is a 1×1 transparent PNG: the screenshot of a computer call's
// output when the call did not run (it was refused, or its arguments were
// wrong) and its result has none; a message after it says why.
var blankPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// appendComputerOutput renders the result of a computer call as a
// computer_call_output with its screenshot (its last image), acknowledging
// the call's safety checks when it ran; the result's text, when the call
// failed or has no screenshot, follows as a user message.
func appendComputerOutput(out []item, r *llm.ToolResult) ([]item, error) {
	var img *llm.Media
	var text []string
	for _, c := range r.Content {
		switch c.Kind {
		case llm.PartImage:
			img = c.Media
		case llm.PartText:
			if c.Text != "" {
				text = append(text, c.Text)
			}
		default:
			return nil, unsupported(string(c.Kind) + " parts in computer call outputs")
		}
	}
	callID, checks := splitComputerCallID(r.CallID)
	o := item{Type: "computer_call_output", CallID: callID}
	shot := computerScreenshot{Type: "computer_screenshot"}
	if img != nil {
		cp, err := mediaPart(llm.Part{Kind: llm.PartImage, Media: img})
		if err != nil {
			return nil, err
		}
		shot.ImageURL = cp.ImageURL
		// A call that ran was approved by a person if it had checks.
		for _, c := range checks {
			o.AcknowledgedSafetyChecks = append(o.AcknowledgedSafetyChecks, safetyCheck{ID: c})
		}
	} else {
		shot.ImageURL = dataURL("image/png", blankPNG)
	}
	o.Output = shot
	out = append(out, o)
	if img == nil || r.IsError {
		msg := strings.Join(text, "\n")
		if msg == "" {
			msg = "The computer action was not carried out."
		}
		out = append(out, item{Type: "message", Role: "user", Content: msg})
	}
	return out, nil
}

// computerScreenshot is a computer_call_output's output.
type computerScreenshot struct {
	Type     string `json:"type"`
	ImageURL string `json:"image_url"`
}
