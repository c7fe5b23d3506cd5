package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// AgentConfig is an agent the server's operator defines; callers name it
// in their requests.
type AgentConfig struct {
	Description  string
	Instructions string
	// Model names the model; empty means the server's default.
	Model string
	// Toolsets name toolsets of [Options.Toolsets] and environment kinds
	// of [Options.Environments] the agent uses.
	Toolsets []string
	// MaxSteps is the agent's default step budget; 0 means the server's.
	MaxSteps int
	// Workspace, when set, gives each session of the agent tools of its
	// own besides Toolsets, typically file and shell tools rooted in a
	// directory of the session's, so that no two sessions share files.
	// It is called with a name unique to the session, chosen when the
	// session is created and stored with it, so that the session gets
	// the same name each time it runs, after a restart or on another
	// replica; the name is 32 lower-case hex digits. It is called each
	// time the session runs, and may be called concurrently. While a
	// request is validated it is called with the empty name: it must
	// then create nothing and return a toolset with the same tool names,
	// whose tools are never called.
	Workspace func(name string) (*loop.Toolset, error)
}

// spec is a session's resolved agent and budgets. It is stored in the
// session's state, so a session runs the same agent after a restart; the
// toolsets it names are looked up in the server's options when it runs.
type spec struct {
	Agent       string           `json:"agent"`
	System      string           `json:"system,omitempty"`
	Model       string           `json:"model,omitempty"`
	ClientTools []ToolDefinition `json:"client_tools,omitempty"`
	// Toolsets are "env:KIND", "toolset:NAME" or "workspace:AGENT:NAME"
	// (the tools AGENT's AgentConfig.Workspace gives the session's
	// workspace NAME).
	Toolsets []string `json:"toolsets,omitempty"`
	// EnvConfig holds, by kind, the entries of the caller's environments
	// that give each session its own (Options.SessionEnvironments).
	EnvConfig   map[string]json.RawMessage `json:"env_config,omitempty"`
	MaxSteps    int                        `json:"max_steps"`
	MaxTime     time.Duration              `json:"max_time,omitempty"`
	IdleTimeout time.Duration              `json:"idle_timeout,omitempty"`
}

var clientToolName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// resolve validates a request and resolves its agent.
func (m *Manager) resolve(req *Request) (*spec, []llm.Message, error) {
	var v validation
	sp := &spec{MaxSteps: m.opts.MaxSteps}
	var agent Agent
	switch {
	case req.Agent.Inline != nil:
		agent = *req.Agent.Inline
		if strings.TrimSpace(agent.Name) == "" {
			v.add("Field required", "body", "agent", "name")
		}
		for i, e := range agent.Environments {
			if !m.hasEnvironment(e.Kind) {
				v.add(fmt.Sprintf("environment kind %q is not provided by this server (available: %s)", e.Kind, m.environmentKinds()), "body", "agent", "environments", i)
				continue
			}
			if f := m.opts.SessionEnvironments[e.Kind]; f != nil {
				var cfg json.RawMessage
				if b := bytes.TrimSpace(e.Raw); len(b) > 0 && b[0] == '{' {
					cfg = e.Raw
				}
				if _, _, err := f(&EnvironmentParams{Config: cfg}); err != nil {
					v.add(err.Error(), "body", "agent", "environments", i)
					continue
				}
				if cfg != nil {
					if sp.EnvConfig == nil {
						sp.EnvConfig = map[string]json.RawMessage{}
					}
					sp.EnvConfig[e.Kind] = cfg
				}
			}
			sp.Toolsets = appendUnique(sp.Toolsets, "env:"+e.Kind)
		}
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"subagents", agent.Subagents}, {"skills", agent.Skills}, {"answer_format", agent.AnswerFormat}} {
			if s := strings.TrimSpace(string(f.raw)); s != "" && s != "null" && s != "[]" {
				v.add(f.name+" is not supported by this server", "body", "agent", f.name)
			}
		}
	case req.Agent.Name != "":
		cfg, ok := m.opts.Agents[req.Agent.Name]
		if !ok {
			v.add(fmt.Sprintf("unknown agent %q (agents of this server: %s)", req.Agent.Name, keys(m.opts.Agents)), "body", "agent")
			break
		}
		agent = Agent{Name: req.Agent.Name, Description: cfg.Description, Instructions: cfg.Instructions, Model: cfg.Model}
		if cfg.MaxSteps > 0 {
			sp.MaxSteps = cfg.MaxSteps
		}
		for _, name := range cfg.Toolsets {
			switch {
			case m.opts.Toolsets[name] != nil:
				sp.Toolsets = appendUnique(sp.Toolsets, "toolset:"+name)
			case m.hasEnvironment(name):
				sp.Toolsets = appendUnique(sp.Toolsets, "env:"+name)
			default:
				v.add(fmt.Sprintf("agent %q uses toolset %q, which this server does not have", req.Agent.Name, name), "body", "agent")
			}
		}
		if cfg.Workspace != nil {
			// Named below, once the request is known to be valid.
			sp.Toolsets = append(sp.Toolsets, "workspace:"+req.Agent.Name+":")
		}
	default:
		v.add("Field required", "body", "agent")
	}
	for path, raw := range req.Overrides {
		var err error
		switch path {
		case "agent.tools":
			var tools []ToolDefinition
			if err = json.Unmarshal(raw, &tools); err == nil {
				agent.Tools = append(agent.Tools, tools...)
			}
		case "agent.instructions":
			err = json.Unmarshal(raw, &agent.Instructions)
		case "agent.model":
			err = json.Unmarshal(raw, &agent.Model)
		default:
			err = fmt.Errorf("override %q is not supported (hrns supports agent.tools, agent.instructions and agent.model)", path)
		}
		if err != nil {
			v.add(err.Error(), "body", "overrides", path)
		}
	}
	sp.Agent = agent.Name
	sp.Model = firstNonEmpty(agent.Model, m.opts.DefaultModel)
	sp.System = systemPrompt(&agent)

	// Client tools: valid, unique, and not shadowing a server tool.
	server, _, err := m.toolsets(sp, "")
	if err != nil {
		v.add(err.Error(), "body", "agent")
	}
	seen := map[string]bool{}
	for i, t := range agent.Tools {
		loc := []any{"body", "agent", "tools", i}
		switch {
		case !clientToolName.MatchString(t.Name):
			v.add("tool name must be 1 to 64 letters, digits or underscores, starting with a letter or underscore", append(loc, "name")...)
			continue
		case seen[t.Name]:
			v.add(fmt.Sprintf("tool %q is declared twice", t.Name), append(loc, "name")...)
			continue
		case server != nil && slices.Contains(server.Names(), t.Name):
			v.add(fmt.Sprintf("tool %q is a tool of the agent's environment", t.Name), append(loc, "name")...)
			continue
		}
		seen[t.Name] = true
		if err := (&loop.Toolset{}).Add(loop.NewClientTool(t.Name, t.Description, t.InputSchema)); err != nil {
			v.add(fmt.Sprintf("input_schema is not a JSON Schema for an object: %v", err), append(loc, "input_schema")...)
			continue
		}
		sp.ClientTools = append(sp.ClientTools, t)
	}

	if req.MaxSteps != nil {
		if *req.MaxSteps < 1 {
			v.add("Input should be greater than or equal to 1", "body", "max_steps")
		} else {
			sp.MaxSteps = *req.MaxSteps
		}
	}
	if req.MaxTimeS != nil {
		if *req.MaxTimeS <= 0 {
			v.add("Input should be greater than 0", "body", "max_time_s")
		} else {
			sp.MaxTime = time.Duration(*req.MaxTimeS * float64(time.Second))
		}
	}
	if req.IdleTimeoutS != nil {
		if *req.IdleTimeoutS <= 0 {
			v.add("Input should be greater than 0", "body", "idle_timeout_s")
		} else {
			sp.IdleTimeout = time.Duration(*req.IdleTimeoutS) * time.Second
		}
	}
	msgs, verr := userMessages(req.Messages, "body", "messages")
	if verr != nil {
		v.fields = append(v.fields, verr.Fields...)
	}
	if len(req.Messages) == 0 && sp.IdleTimeout == 0 {
		v.add("a session needs a first message, unless idle_timeout_s keeps it open for one", "body", "messages")
	}
	if err := v.err(); err != nil {
		return nil, nil, err
	}
	for i, ref := range sp.Toolsets {
		if strings.HasPrefix(ref, "workspace:") {
			sp.Toolsets[i] = ref + strings.ReplaceAll(newID(), "-", "")
		}
	}
	return sp, msgs, nil
}

// userMessages converts API messages to model messages.
func userMessages(in []UserMessage, loc ...any) ([]llm.Message, *ValidationError) {
	var v validation
	var out []llm.Message
	for i, um := range in {
		mloc := append(slices.Clone(loc), i)
		if um.Type != "" && um.Type != "user_message" {
			v.add(fmt.Sprintf("message type %q is not user_message", um.Type), append(mloc, "type")...)
		}
		if strings.TrimSpace(um.Message) == "" && len(um.Images) == 0 {
			v.add("message is empty", append(mloc, "message")...)
			continue
		}
		msg := llm.Message{Role: llm.RoleUser}
		if um.Message != "" {
			msg.Parts = append(msg.Parts, llm.TextPart(um.Message))
		}
		for j, img := range um.Images {
			mime, data, err := parseDataURI(img)
			if err != nil {
				v.add(err.Error(), append(mloc, "images", j)...)
				continue
			}
			msg.Parts = append(msg.Parts, llm.ImagePart(mime, data))
		}
		out = append(out, msg)
	}
	if err := v.err(); err != nil {
		return nil, err.(*ValidationError)
	}
	return out, nil
}

// parseDataURI decodes "data:image/png;base64,....".
func parseDataURI(s string) (string, []byte, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	meta, payload, ok2 := strings.Cut(rest, ",")
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !ok || !ok2 || !isB64 || !strings.HasPrefix(mime, "image/") {
		return "", nil, fmt.Errorf("image must be a base64 data URI: data:image/png;base64,<data>")
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, fmt.Errorf("image data is not base64: %v", err)
	}
	return mime, data, nil
}

func systemPrompt(a *Agent) string {
	var parts []string
	switch {
	case a.Description != "":
		parts = append(parts, fmt.Sprintf("You are %s. %s", a.Name, a.Description))
	case a.Name != "":
		parts = append(parts, fmt.Sprintf("You are %s.", a.Name))
	}
	if s := strings.TrimSpace(a.Instructions); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n\n")
}

// toolsets joins the server-side toolsets of a session's spec, for the
// session id (empty while validating a request). The returned func closes
// the session's own environments when the run stops; it is nil when the
// session has none.
func (m *Manager) toolsets(sp *spec, id string) (_ *loop.Toolset, closeEnv func(ended bool), err error) {
	var (
		sets    []*loop.Toolset
		closers []func(bool)
	)
	defer func() {
		if err != nil {
			joinClosers(closers)(false)
		}
	}()
	for _, ref := range sp.Toolsets {
		kind, name, _ := strings.Cut(ref, ":")
		var ts *loop.Toolset
		switch kind {
		case "env":
			ts = m.opts.Environments[name]
			if f := m.opts.SessionEnvironments[name]; f != nil {
				t, c, err := f(&EnvironmentParams{Session: id, Config: sp.EnvConfig[name]})
				if err != nil {
					return nil, closeEnv, fmt.Errorf("environment %q: %w", name, err)
				}
				if c != nil {
					closers = append(closers, c)
				}
				if ts = t; ts == nil {
					return nil, closeEnv, fmt.Errorf("environment %q: %w", name, errNoEnvironment)
				}
			}
		case "toolset":
			ts = m.opts.Toolsets[name]
		case "workspace":
			i := strings.LastIndexByte(name, ':')
			if a := m.opts.Agents[name[:max(i, 0)]]; i >= 0 && a != nil && a.Workspace != nil {
				var err error
				if ts, err = a.Workspace(name[i+1:]); err != nil {
					return nil, closeEnv, fmt.Errorf("the tools of agent %q: %w", name[:i], err)
				}
				name = name[:i]
			}
		}
		if ts == nil {
			return nil, closeEnv, fmt.Errorf("toolset %q is not configured on this server", name)
		}
		sets = append(sets, ts)
	}
	joined, err := loop.Join(sets...)
	if err != nil || len(closers) == 0 {
		return joined, nil, err
	}
	return joined, joinClosers(closers), nil
}

func keys[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
