package session

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/internal/rawjson"
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
	// ReasoningEffort is the agent's reasoning_effort ("disabled",
	// "low", "medium", "high", "xhigh"); empty leaves it to the model.
	ReasoningEffort string
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
	// Permissions and Hooks, when set, replace the server's
	// (Options.Permissions and Options.Hooks) for the agent's sessions.
	Permissions *loop.Permissions
	Hooks       []loop.Hook
}

// spec is a session's resolved agent and budgets. It is stored in the
// session's state, so a session runs the same agent after a restart; the
// toolsets it names are looked up in the server's options when it runs.
type spec struct {
	Agent string `json:"agent"`
	// Named says Agent names an agent of the server (not an inline one
	// that may bear the same name): its policy applies.
	Named  bool   `json:"named,omitempty"`
	System string `json:"system,omitempty"`
	Model  string `json:"model,omitempty"`
	// Reasoning is the model's reasoning setting, from the agent's
	// reasoning_effort (see reasoningConfig); nil leaves it to the model.
	Reasoning   *llm.ReasoningConfig `json:"reasoning,omitempty"`
	ClientTools []ToolDefinition     `json:"client_tools,omitempty"`
	// Computer is the view of the user's desktop whose computer tool the
	// caller runs (a desktop environment, host user_device), nil when
	// the agent has none (userdesktop.go).
	Computer *llm.ComputerSpec `json:"computer,omitempty"`
	// Toolsets are "env:KIND", "toolset:NAME" or "workspace:AGENT:NAME"
	// (the tools AGENT's AgentConfig.Workspace gives the session's
	// workspace NAME).
	Toolsets []string `json:"toolsets,omitempty"`
	// EnvDefs are the inline environments' definitions by kind, as
	// normalised and overridden (start_url, headless, mode...): the
	// Config given to the kind's [Options.SessionEnvironments] func.
	EnvDefs map[string]json.RawMessage `json:"env_defs,omitempty"`
	// Profiles are the browser profiles the environments start from, by
	// kind: "OWNER\x00ID", with "\x00persist" after it when the session's
	// browser is written back (see bindProfiles).
	Profiles map[string]string `json:"profiles,omitempty"`
	// AnswerFormat is the JSON Schema (of an object) the final answer
	// must match; nil means a text answer.
	AnswerFormat json.RawMessage `json:"answer_format,omitempty"`
	// Skills are the agent's skills, resolved (see skills.go).
	Skills []Skill `json:"skills,omitempty"`
	// Subagents are the agent's subagents (see subagents.go).
	Subagents []subagent `json:"subagents,omitempty"`
	// MCPServers are the MCP servers the inline environments name, each
	// run's own (see mcpservers.go).
	MCPServers  []MCPServer   `json:"mcp_servers,omitempty"`
	MaxSteps    int           `json:"max_steps"`
	MaxTime     time.Duration `json:"max_time,omitempty"`
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
}

var clientToolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`) })

// normalize returns the request as hrns understands it: what the body
// left to defaults is filled in, so that the stored request, which GET
// /api/v2/sessions/{id} echoes, is a valid SessionRequest of the
// reference. It is the one place where a request is completed before it is
// validated and resolved (resolve), and the place where names and ids
// of agents and environments a registry keeps are to be resolved (agents
// of Options.Agents are resolved by resolve, and skills by resolveSkill).
//
// The body is not changed: normalize works on a copy.
func (m *Manager) normalize(req *Request) *Request {
	out := *req
	if req.Agent.Inline != nil {
		out.Agent = AgentRef{Inline: normalizeAgent(req.Agent.Inline)}
	}
	out.Messages = nil
	for _, um := range req.Messages {
		out.Messages = append(out.Messages, normalizeMessage(um))
	}
	if out.Queue == nil {
		out.Queue = new(true)
	}
	return &out
}

// normalizeAgent completes an inline agent: the description and the tool
// descriptions the reference requires default to the name, inline
// environments get their id and kind, and subagents are completed alike.
func normalizeAgent(in *Agent) *Agent {
	a := *in
	if strings.TrimSpace(a.Description) == "" {
		a.Description = a.Name
	}
	a.Environments = make([]Environment, 0, len(in.Environments))
	for _, e := range in.Environments {
		if e.Fields != nil {
			e.Fields = maps.Clone(e.Fields)
			if e.Kind == "" {
				e.Kind = "web" // the reference's default kind
				switch e.ID {
				case "desktop", "android", "workstation":
					e.Kind = e.ID
				}
				e.Set("kind", e.Kind)
			}
			if e.ID == "" {
				e.ID = e.Kind
				e.Set("id", e.ID)
			}
			if raw, ok := e.Fields["host"]; (!ok || rawjson.IsNull(raw)) && e.Kind == envDesktop {
				e.Set("host", "user_device") // the only one, and required (null too)
			}
		}
		a.Environments = append(a.Environments, e)
	}
	a.Tools = slices.Clone(in.Tools)
	for i := range a.Tools {
		if strings.TrimSpace(a.Tools[i].Description) == "" {
			a.Tools[i].Description = a.Tools[i].Name
		}
	}
	a.Subagents = slices.Clone(in.Subagents)
	for i, sub := range a.Subagents {
		if sub.Inline != nil {
			a.Subagents[i].Inline = normalizeAgent(sub.Inline)
		}
	}
	return &a
}

// overridable are the override paths hrns applies, besides the
// environment paths agent.environments[kind=KIND].FIELD.
var overridable = []string{"agent.tools", "agent.instructions", "agent.model", "agent.reasoning_effort", "agent.description", "agent.answer_format",
	"max_steps", "max_time_s", "idle_timeout_s"}

// envOverride matches agent.environments[kind=KIND].FIELD.
var envOverride = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^agent\.environments\[kind=([a-z0-9_-]+)\]\.([a-z_]+)$`)
})

// applyOverrides applies the request's overrides to the resolved agent
// and request, in the order of their paths; each value must have the
// type of the field it sets. The budgets (max_steps...) are set on req,
// which resolve reads after.
func (m *Manager) applyOverrides(req *Request, agent *Agent, sp *spec, v *validation) {
	for _, path := range sortedKeys(req.Overrides) {
		raw := req.Overrides[path]
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
		case "agent.reasoning_effort":
			err = json.Unmarshal(raw, &agent.ReasoningEffort)
		case "agent.description":
			err = json.Unmarshal(raw, &agent.Description)
		case "agent.answer_format":
			agent.AnswerFormat = raw
		case "max_steps":
			err = json.Unmarshal(raw, &req.MaxSteps)
		case "max_time_s":
			err = json.Unmarshal(raw, &req.MaxTimeS)
		case "idle_timeout_s":
			err = json.Unmarshal(raw, &req.IdleTimeoutS)
		default:
			mt := envOverride().FindStringSubmatch(path)
			if mt == nil {
				err = fmt.Errorf("override %q is not supported (hrns supports %s and agent.environments[kind=KIND].FIELD)", path, strings.Join(overridable, ", "))
				break
			}
			kind, field := mt[1], mt[2]
			if field == "kind" || field == "id" || field == "mcp_servers" {
				err = fmt.Errorf("override %q: an environment's %s cannot be overridden", path, field)
				break
			}
			if !json.Valid(raw) {
				err = fmt.Errorf("override %q: not JSON", path)
				break
			}
			def := map[string]json.RawMessage{}
			if old := sp.EnvDefs[kind]; old != nil {
				json.Unmarshal(old, &def)
			} else if !slices.Contains(sp.Toolsets, "env:"+kind) {
				err = fmt.Errorf("override %q: the agent has no %s environment", path, kind)
				break
			} else {
				def["id"], _ = json.Marshal(kind)
				def["kind"] = def["id"]
			}
			def[field] = raw
			if sp.EnvDefs == nil {
				sp.EnvDefs = map[string]json.RawMessage{}
			}
			sp.EnvDefs[kind], _ = json.Marshal(def)
		}
		if err != nil {
			v.add(err.Error(), "body", "overrides", path)
		}
	}
}

// checkAnswerFormat accepts a JSON Schema of an object: the reference's
// answers are text or an object.
func checkAnswerFormat(raw json.RawMessage) error {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil || doc == nil {
		return fmt.Errorf("answer_format must be a JSON Schema object")
	}
	if doc["type"] != "object" {
		return fmt.Errorf(`answer_format must describe an object ("type": "object"): a structured answer is a JSON object`)
	}
	if err := (&loop.OutputSchema{Schema: raw}).Check(); err != nil {
		return fmt.Errorf("answer_format: %v", err)
	}
	return nil
}

// normalizeMessage gives a message its type and caller.
func normalizeMessage(um UserMessage) UserMessage {
	if um.Type == "" {
		um.Type = "user_message"
	}
	if um.CallerID == "" {
		um.CallerID = "user"
	}
	return um
}

// resolve validates a request of owner, whose agent the registry has
// resolved ([Manager.forSession]), and resolves its agent and subagents.
func (m *Manager) resolve(ctx context.Context, owner string, req *Request) (*spec, []llm.Message, error) {
	left := maxSubagents
	rs := &resolving{ctx: ctx, owner: owner, left: &left}
	if req.Agent.Inline != nil {
		rs.path = []string{req.Agent.Inline.Name}
	} else if req.Agent.Name != "" {
		rs.path = []string{req.Agent.Name}
	}
	return m.resolveDepth(rs, req, 0)
}

// resolveDepth is resolve for an agent depth subagents down, whose
// ancestors rs names.
func (m *Manager) resolveDepth(rs *resolving, req *Request, depth int) (*spec, []llm.Message, error) {
	var v validation
	sp := &spec{MaxSteps: m.opts.MaxSteps}
	var agent Agent
	switch {
	case req.Agent.Inline != nil:
		agent = *req.Agent.Inline
		if strings.TrimSpace(agent.Name) == "" {
			v.add("Field required", "body", "agent", "name")
		}
		kinds := map[string]int{} // the first environment of each kind
		for i, e := range agent.Environments {
			if e.Kind == "" {
				e.Kind = e.ID // an id names a kind of the server
			}
			if j, dup := kinds[e.Kind]; dup {
				v.add(duplicateKind(j, e.Kind), "body", "agent", "environments", i)
				continue
			}
			kinds[e.Kind] = i
			if e.Kind == envDesktop && !m.hasEnvironment(e.Kind) {
				// The user's own desktop: its computer tool is the
				// caller's (userdesktop.go).
				if msg := userDesktopHost(&e); msg != "" {
					v.add(msg, "body", "agent", "environments", i, "host")
					continue
				}
				if depth > 0 {
					v.add(subagentDesktop, "body", "agent", "environments", i)
					continue
				}
				sp.Computer = &llm.ComputerSpec{Width: UserDesktopWidth, Height: UserDesktopHeight}
				continue
			}
			if e.Kind == "android" {
				v.fields = append(v.fields, FieldError{Loc: []any{"body", "agent", "environments", i}, Type: "value_error",
					Msg: `environment kind "android" is not available on this server: hrns drives no Android device (use a web or workstation environment, or client-side tools that drive a device of yours)`})
				continue
			}
			if e.Kind == "workstation" && !m.hasEnvironment(e.Kind) {
				v.add(fmt.Sprintf(`environment kind "workstation" is not provided by this server: its operator did not enable it (hrns serve --workstation gives one: a sandboxed shell, the file tools in the session's workspace and a browser) (available: %s)`, m.offeredKinds()), "body", "agent", "environments", i)
				continue
			}
			if !m.hasEnvironment(e.Kind) {
				v.add(fmt.Sprintf("environment kind %q is not provided by this server (available: %s)", e.Kind, m.offeredKinds()), "body", "agent", "environments", i)
				continue
			}
			var def json.RawMessage
			if e.Fields != nil {
				fields := e.Fields
				if raw, ok := fields["mcp_servers"]; ok {
					// Kept in the spec, apart from the environment's
					// definition: env and headers may be secrets.
					m.addMCPServers(&v, raw, sp, "body", "agent", "environments", i, "mcp_servers")
					fields = maps.Clone(fields)
					delete(fields, "mcp_servers")
				}
				def, _ = json.Marshal(fields)
			}
			if f := m.opts.SessionEnvironments[e.Kind]; f != nil {
				if _, _, err := f(&EnvironmentParams{Config: def}); err != nil {
					v.add(err.Error(), "body", "agent", "environments", i)
					continue
				}
			}
			sp.Toolsets = appendUnique(sp.Toolsets, "env:"+e.Kind)
			if def != nil {
				if sp.EnvDefs == nil {
					sp.EnvDefs = map[string]json.RawMessage{}
				}
				sp.EnvDefs[e.Kind] = def
			}
		}
		sp.Subagents = m.resolveSubagents(rs, agent.Subagents, depth, &v)
		sp.Skills = m.resolveSkills(agent.Skills, &v)

	case req.Agent.Name != "":
		cfg, ok := m.opts.Agents[req.Agent.Name]
		if !ok {
			v.add(fmt.Sprintf("unknown agent %q (agents of this server: %s)", req.Agent.Name, keys(m.opts.Agents)), "body", "agent")
			break
		}
		agent = Agent{Name: req.Agent.Name, Description: cfg.Description, Instructions: cfg.Instructions, Model: cfg.Model}
		if cfg.ReasoningEffort != "" {
			agent.ReasoningEffort = &cfg.ReasoningEffort
		}
		sp.Named = true
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
	m.applyOverrides(req, &agent, sp, &v)
	if f := strings.TrimSpace(string(agent.AnswerFormat)); f != "" && f != "null" {
		if err := checkAnswerFormat(agent.AnswerFormat); err != nil {
			v.add(err.Error(), "body", "agent", "answer_format")
		} else {
			sp.AnswerFormat = agent.AnswerFormat
		}
	}
	sp.Agent = agent.Name
	sp.Model = firstNonEmpty(agent.Model, m.opts.DefaultModel)
	if e := agent.ReasoningEffort; e != nil {
		// The model's name as its provider gets it: the client's own
		// model when the agent and the server name none.
		rc, err := reasoningConfig(firstNonEmpty(sp.Model, "(the provider's default model)"), *e, m.reasoningSupport(sp.Model))
		if err != nil {
			v.add(err.Error(), "body", "agent", "reasoning_effort")
		}
		sp.Reasoning = rc
	}
	sp.System = systemPrompt(&agent)
	if p := skillsPrompt(sp.Skills); p != "" {
		sp.System = strings.TrimSpace(sp.System + "\n\n" + p)
	}

	// Client tools: valid, unique, and not shadowing a server tool.
	server, _, err := m.toolsets(sp, "")
	if err != nil {
		v.add(err.Error(), "body", "agent")
	}
	seen := map[string]bool{}
	for i, t := range agent.Tools {
		loc := []any{"body", "agent", "tools", i}
		switch {
		case !clientToolName().MatchString(t.Name):
			v.add("tool name must be 1 to 64 letters, digits or underscores, starting with a letter or underscore", append(loc, "name")...)
			continue
		case seen[t.Name]:
			v.add(fmt.Sprintf("tool %q is declared twice", t.Name), append(loc, "name")...)
			continue
		case t.Name == delegateTool && len(sp.Subagents) > 0:
			v.add(fmt.Sprintf("tool %q is the tool of the agent's subagents", t.Name), append(loc, "name")...)
			continue
		case server != nil && slices.Contains(server.Names(), t.Name):
			v.add(fmt.Sprintf("tool %q is a tool of the agent's environment", t.Name), append(loc, "name")...)
			continue
		case mcpToolPrefix(sp.MCPServers, t.Name) != "":
			v.add(fmt.Sprintf("tool %q is named like the tools of the environment's MCP server %q (%s__TOOL)", t.Name, mcpToolPrefix(sp.MCPServers, t.Name), mcpToolPrefix(sp.MCPServers, t.Name)), append(loc, "name")...)
			continue
		}
		seen[t.Name] = true
		if err := (&loop.Toolset{}).Add(loop.NewClientTool(t.Name, t.Description, t.InputSchema)); err != nil {
			v.add(fmt.Sprintf("input_schema is not a JSON Schema for an object: %v", err), append(loc, "input_schema")...)
			continue
		}
		sp.ClientTools = append(sp.ClientTools, t)
	}
	checkComputer(&v, sp, server)

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
			sp.MaxTime = seconds(*req.MaxTimeS)
		}
	}
	if req.IdleTimeoutS != nil {
		if *req.IdleTimeoutS <= 0 {
			v.add("Input should be greater than 0", "body", "idle_timeout_s")
		} else {
			sp.IdleTimeout = seconds(float64(*req.IdleTimeoutS))
		}
	}
	msgs, verr := userMessages(req.Messages, "body", "messages")
	if verr != nil {
		v.fields = append(v.fields, verr.Fields...)
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

// seconds returns s seconds (s > 0) as a duration: the longest duration
// (about 292 years) for more than it holds, where converting or
// multiplying would wrap, a long idle_timeout_s becoming a negative one (no
// idle wait) or a fraction of a second.
func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// environmentFields are the fields of an inline environment that hrns
// reads itself (the others go to the kind's [Options.SessionEnvironments]
// func, when the server has one).
var environmentFields = []string{"id", "kind"}

// notHonoured lists the fields of a normalised request that hrns accepts
// and keeps but does not act on, as dotted paths: the server says so in
// the Hrns-Not-Honoured header of the creation's answer.
func (m *Manager) notHonoured(req *Request) []string {
	var out []string
	if req.DeleteAfterMin != nil {
		out = append(out, "delete_after_min")
	}
	if req.DeleteScreenshotAfterMin != nil {
		out = append(out, "delete_screenshot_after_min")
	}
	if req.Agent.Inline != nil {
		for i, e := range req.Agent.Inline.Environments {
			if m.opts.SessionEnvironments[e.Kind] != nil {
				continue // its func takes the definition
			}
			for _, f := range sortedKeys(e.Fields) {
				if !slices.Contains(environmentFields, f) && (f != "vault_id" || m.opts.Vaults == nil) && (f != "host" || e.Kind != envDesktop) && f != "mcp_servers" {
					out = append(out, fmt.Sprintf("agent.environments[%d].%s", i, f))
				}
			}
		}
	}
	return out
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
		msg := llm.Message{Role: llm.RoleUser}
		switch {
		case um.Message != "":
			msg.Parts = append(msg.Parts, llm.TextPart(um.Message))
		case len(um.Images) == 0:
			// The reference allows an empty message; providers refuse
			// empty text, so the model reads that it was empty.
			msg.Parts = append(msg.Parts, llm.TextPart(emptyMessage))
		}
		for j, img := range um.Images {
			if u, ok := imageURL(img); ok {
				msg.Parts = append(msg.Parts, llm.Part{Kind: llm.PartImage, Media: &llm.Media{URL: u}})
				continue
			}
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

// emptyMessage is what the model reads for an empty message.
const emptyMessage = "(empty message)"

// imageURL reports whether an image is given by an http(s) URL, which the
// model's provider fetches.
func imageURL(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		return "", false
	}
	return u.String(), true
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
				t, c, err := f(&EnvironmentParams{Session: id, Config: sp.EnvDefs[name], Profile: m.browserProfile(sp, name, id), Files: m.filesFolder(sp, id)})
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
		case "skills":
			var err error
			if ts, err = m.skillTools(name); err != nil {
				return nil, closeEnv, err
			}
		case "vaults":
			var err error
			if ts, err = m.vaultTools(name, id); err != nil {
				return nil, closeEnv, err
			}
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
	if ts, err := skillTools(sp.Skills); err != nil {
		return nil, closeEnv, err
	} else if ts != nil {
		sets = append(sets, ts)
	}
	joined, err := loop.Join(sets...)
	if err == nil && len(sp.MCPServers) > 0 && id != "" {
		ts, c, merr := m.mountMCP(sp, id, joined)
		if merr != nil {
			return nil, closeEnv, merr
		}
		closers = append(closers, func(bool) { c() })
		joined, err = loop.Join(joined, ts)
	}
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

// policy returns the permission policy and hooks of the session's runs:
// its named agent's, or the server's.
func (m *Manager) policy(sp *spec) (*loop.Permissions, []loop.Hook) {
	perms, hooks := m.opts.Permissions, m.opts.Hooks
	if a := m.opts.Agents[sp.Agent]; sp.Named && a != nil {
		if a.Permissions != nil {
			perms = a.Permissions
		}
		if a.Hooks != nil {
			hooks = a.Hooks
		}
	}
	return perms, hooks
}

type sessionIDKey struct{}

// IDFromContext returns the ID of the session whose run ctx belongs to:
// hooks (Options.Hooks) and tools use it to tell sessions apart.
func IDFromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(sessionIDKey{}).(string)
	return id, ok
}
