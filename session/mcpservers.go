package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/internal/rawjson"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/store"
)

// MCPServer is an MCP server an environment names (see [api.MCPServer]).
type MCPServer = api.MCPServer

// MCPServerOptions say whether and how the environments of sessions
// reach the MCP servers they name ([Options.MCPServers]). Without them a
// request naming a server is refused (422).
type MCPServerOptions struct {
	// Check says why this server does not reach s (for example: stdio
	// servers are not enabled, or its command is not one the operator
	// allows), or returns nil. It is called while a request is
	// validated, for each server it names, after the shape of s was
	// checked; its error is the 422 message at the server's entry. Nil
	// accepts every server.
	Check func(s *MCPServer) error
	// Mount connects one run of a session to its servers and returns
	// their tools, named SERVER__TOOL, and a func that ends the
	// connections (and stops the processes) when the run stops: when the
	// session waits, yields, pauses or ends, or its run crashes. A server
	// that cannot be reached is left out (Mount says so in its logs), so
	// that the others and the session still run. Mount is called each
	// time a session runs, and may be called concurrently.
	Mount func(ctx context.Context, p *MCPParams) (tools *loop.Toolset, close func(), err error)
	// MountTimeout bounds Mount; 0 means 60 seconds.
	MountTimeout time.Duration
	// Secrets, when set, encrypts the servers' env and headers values
	// before they are stored (a session's request and state, registered
	// environments and agents, schedules' templates), each bound to its
	// owner or session; they are decrypted only for Mount. Without it,
	// a definition giving such values is refused (422) unless
	// PlaintextSecrets allows storing them as given.
	Secrets Sealer
	// PlaintextSecrets lets env and headers values be stored in
	// plaintext when there is no Secrets.
	PlaintextSecrets bool
}

// MCPParams are the arguments of [MCPServerOptions.Mount].
type MCPParams struct {
	// Session is the session's ID.
	Session string
	// Workspace names the session's workspace: the directory of that
	// name under [Options.Workspaces] (see [Manager.WorkspaceName]).
	Workspace string
	// Servers are the servers the session's environments name, with
	// their env and headers (which may be secrets: never log them).
	Servers []MCPServer
	// Unreachable, when Mount leaves a server out, says which and why
	// (never with its env or headers values, nor a URL's query): the
	// session's log and its model are told. It may be called
	// concurrently, at most once per server.
	Unreachable func(server string, err error)
}

// mcpFailure is a server left out of a run, and why.
type mcpFailure struct {
	Server string
	Reason string
}

// Bounds of MCP servers.
const (
	maxMCPServers      = 16   // per agent
	maxMCPArgs         = 64   // arguments of a command
	maxMCPEnv          = 64   // variables of a command
	maxMCPHeaders      = 32   // headers of an HTTP server
	maxMCPText         = 4096 // a command, an argument, a URL
	maxMCPValue        = 8192 // a variable's or a header's value
	maxMCPName         = 256  // a variable's or a header's name
	defaultMountTimout = 60 * time.Second
)

var (
	mcpServerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`) })
	envVarName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	headerName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$") })
)

// reservedHeaders are headers the MCP client sets itself.
var reservedHeaders = []string{"host", "content-length", "content-type", "transfer-encoding", "connection", "accept", "mcp-session-id", "mcp-protocol-version"}

// validateMCPServers checks the servers of one environment: their shape,
// and names unique among them.
func validateMCPServers(v *validation, servers []MCPServer, loc ...any) {
	if len(servers) > maxMCPServers {
		v.add(fmt.Sprintf("at most %d MCP servers", maxMCPServers), loc...)
		return
	}
	seen := map[string]int{}
	for i := range servers {
		sloc := at(loc, i)
		validateMCPServer(v, &servers[i], sloc...)
		if j, dup := seen[servers[i].Name]; dup && servers[i].Name != "" {
			v.add(fmt.Sprintf("MCP server names must be unique: %q is also the name of entry %d", servers[i].Name, j), at(sloc, "name")...)
		}
		seen[servers[i].Name] = i
	}
}

// validateMCPServer checks one server's shape.
func validateMCPServer(v *validation, s *MCPServer, loc ...any) {
	switch {
	case s.Name == "":
		v.add("Field required", at(loc, "name")...)
	case !mcpServerName().MatchString(s.Name):
		v.add("name must be 1 to 32 letters, digits, '_' or '-' (the server's tools are named NAME__TOOL)", at(loc, "name")...)
	case strings.Contains(s.Name, "__"):
		v.add("name must not contain '__', which separates the server's name from its tools' names", at(loc, "name")...)
	}
	text := func(val, field string, max int) {
		switch {
		case len(val) > max:
			v.add(fmt.Sprintf("at most %d bytes", max), at(loc, field)...)
		case !utf8.ValidString(val) || strings.IndexByte(val, 0) >= 0:
			v.add("must be text without NUL bytes", at(loc, field)...)
		}
	}
	absent := func(set bool, field, transport string) {
		if set {
			v.add(fmt.Sprintf("%s is not a field of the %s transport", field, transport), at(loc, field)...)
		}
	}
	switch s.Transport {
	case "":
		v.add("Field required", at(loc, "transport")...)
	case api.MCPStdio:
		if s.Command == nil || strings.TrimSpace(*s.Command) == "" {
			v.add("Field required: a stdio server's command", at(loc, "command")...)
		} else {
			text(*s.Command, "command", maxMCPText)
		}
		if len(s.Args) > maxMCPArgs {
			v.add(fmt.Sprintf("at most %d arguments", maxMCPArgs), at(loc, "args")...)
		} else {
			for i, a := range s.Args {
				text(a, fmt.Sprint("args.", i), maxMCPText)
			}
		}
		if len(s.Env) > maxMCPEnv {
			v.add(fmt.Sprintf("at most %d variables", maxMCPEnv), at(loc, "env")...)
		} else {
			for _, k := range sortedKeys(s.Env) {
				if len(k) > maxMCPName || !envVarName().MatchString(k) {
					v.add("a variable's name is letters, digits and '_', not starting with a digit, at most 256 bytes", at(loc, "env")...)
				} else if isSealed(s.Env[k]) && len(s.Env[k]) <= maxSealedValue {
					// sealed by this server (a registered definition, a
					// schedule's template): opened when it is stored
				} else if s.Env[k] == api.RedactedValue {
					v.add(redactedGiven(k), at(loc, "env")...)
				} else if val := s.Env[k]; len(val) > maxMCPValue || !utf8.ValidString(val) || strings.IndexByte(val, 0) >= 0 {
					v.add(fmt.Sprintf("the value of %s must be text without NUL bytes, at most %d bytes", k, maxMCPValue), at(loc, "env")...)
				}
			}
		}
		absent(s.URL != nil, "url", "stdio")
		absent(s.Headers != nil, "headers", "stdio")
	case api.MCPStreamableHTTP, api.MCPSSE:
		if s.URL == nil || *s.URL == "" {
			v.add("Field required: an HTTP server's url", at(loc, "url")...)
		} else if msg := checkMCPURL(*s.URL); msg != "" {
			v.add(msg, at(loc, "url")...)
		}
		if len(s.Headers) > maxMCPHeaders {
			v.add(fmt.Sprintf("at most %d headers", maxMCPHeaders), at(loc, "headers")...)
		} else {
			for _, k := range sortedKeys(s.Headers) {
				val := s.Headers[k]
				switch {
				case len(k) > maxMCPName || !headerName().MatchString(k):
					v.add("a header's name is an HTTP token, at most 256 bytes", at(loc, "headers")...)
				case val == api.RedactedValue:
					v.add(redactedGiven(k), at(loc, "headers")...)
				case slices.Contains(reservedHeaders, strings.ToLower(k)):
					v.add(fmt.Sprintf("header %s is set by the MCP client", k), at(loc, "headers")...)
				case isSealed(val) && len(val) <= maxSealedValue:
					// sealed by this server: opened when it is stored
				case len(val) > maxMCPValue || !utf8.ValidString(val) || strings.ContainsFunc(val, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }):
					v.add(fmt.Sprintf("the value of header %s must be text without control characters, at most %d bytes", k, maxMCPValue), at(loc, "headers")...)
				}
			}
		}
		absent(s.Command != nil, "command", s.Transport)
		absent(s.Args != nil, "args", s.Transport)
		absent(s.Env != nil, "env", s.Transport)
	default:
		v.add("Input should be 'stdio', 'streamable_http' or 'sse'", at(loc, "transport")...)
	}
}

// redactedGiven is the error of a value given as the redaction marker:
// a definition read back from hrns and sent as a new one.
func redactedGiven(k string) string {
	return fmt.Sprintf("the value of %s is %q, as hrns shows secrets: give the value itself (a registered definition sent back to its own PUT or PATCH keeps the values it had)", k, api.RedactedValue)
}

// checkMCPURL says what is wrong with an HTTP server's URL, or returns "".
func checkMCPURL(s string) string {
	if len(s) > maxMCPText {
		return fmt.Sprintf("at most %d bytes", maxMCPText)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "url must be an http or https URL"
	}
	if u.User != nil {
		return "url must not carry credentials: give them in headers, which are never shown back"
	}
	return ""
}

// addMCPServers validates the mcp_servers of an inline environment of a
// session's agent, asks the operator's Check about each, and adds them to
// the spec (names unique across the agent's environments).
func (m *Manager) addMCPServers(v *validation, raw json.RawMessage, sp *spec, loc ...any) {
	if rawjson.IsNull(raw) {
		return
	}
	if b := bytes.TrimSpace(raw); b[0] != '[' {
		v.add("Input should be a valid list", loc...)
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		v.add("Input should be a valid list", loc...)
		return
	}
	if len(items) > maxMCPServers {
		v.add(fmt.Sprintf("at most %d MCP servers", maxMCPServers), loc...)
		return
	}
	servers := make([]MCPServer, 0, len(items))
	var sv validation
	for i, item := range items {
		var s MCPServer
		if err := decodeObject(item, &s, at(loc, i)...); err != nil {
			sv.fields = append(sv.fields, err.(*ValidationError).Fields...)
			continue
		}
		servers = append(servers, s)
	}
	if len(sv.fields) == 0 {
		validateMCPServers(&sv, servers, loc...)
	}
	if len(sv.fields) > 0 {
		v.fields = append(v.fields, sv.fields...)
		return
	}
	for i := range servers {
		s := &servers[i]
		sloc := at(loc, i)
		if slices.ContainsFunc(sp.MCPServers, func(o MCPServer) bool { return o.Name == s.Name }) {
			v.add(fmt.Sprintf("MCP server %q is named by another environment of the agent: names must be unique", s.Name), at(sloc, "name")...)
			continue
		}
		if len(sp.MCPServers) >= maxMCPServers {
			v.add(fmt.Sprintf("an agent has at most %d MCP servers", maxMCPServers), sloc...)
			return
		}
		o := m.opts.MCPServers
		if o == nil || o.Mount == nil {
			v.add("this server does not connect sessions to MCP servers: its operator did not enable them (hrns serve connects to HTTP servers, and with --mcp-stdio starts stdio ones)", sloc...)
			continue
		}
		if o.Check != nil {
			if err := o.Check(s); err != nil {
				v.add(err.Error(), sloc...)
				continue
			}
		}
		sp.MCPServers = append(sp.MCPServers, *s)
	}
}

// mcpToolPrefix returns the server whose tools' names start like name
// (SERVER__), or "".
func mcpToolPrefix(servers []MCPServer, name string) string {
	for _, s := range servers {
		if strings.HasPrefix(name, s.Name+"__") {
			return s.Name
		}
	}
	return ""
}

// mountMCP connects a run of session id to its spec's MCP servers. Tools
// whose names clash with others' (taken) are left out, with a warning.
func (m *Manager) mountMCP(sp *spec, id string, taken *loop.Toolset) (*loop.Toolset, func(), error) {
	o := m.opts.MCPServers
	if o == nil || o.Mount == nil {
		return nil, nil, fmt.Errorf("the session's environments name MCP servers, and this server no longer connects to them")
	}
	timeout := o.MountTimeout
	if timeout <= 0 {
		timeout = defaultMountTimout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	servers, failed := m.openServers(id, sp.MCPServers)
	var mu sync.Mutex
	unreachable := func(server string, err error) {
		i := slices.IndexFunc(servers, func(s MCPServer) bool { return s.Name == server })
		if err == nil || i < 0 {
			return
		}
		reason := scrubSecrets(&servers[i], err.Error())
		mu.Lock()
		defer mu.Unlock()
		if !slices.ContainsFunc(failed, func(f mcpFailure) bool { return f.Server == server }) {
			failed = append(failed, mcpFailure{Server: server, Reason: reason})
		}
	}
	var ts *loop.Toolset
	var closeAll func()
	var err error
	if len(servers) > 0 {
		ts, closeAll, err = o.Mount(ctx, &MCPParams{Session: id, Workspace: workspaceOf(sp, id), Servers: servers, Unreachable: unreachable})
	}
	mu.Lock()
	if len(failed) > 0 {
		m.mcpFailed.Store(id, slices.Clone(failed))
	}
	mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("the MCP servers: %w", err)
	}
	if closeAll == nil {
		closeAll = func() {}
	}
	if ts == nil {
		return &loop.Toolset{}, closeAll, nil
	}
	out := &loop.Toolset{}
	for def := range ts.All() {
		if taken != nil {
			if _, clash := taken.Lookup(def.Name); clash {
				m.log.Warn("left out an MCP tool whose name another tool of the session has", "session", id, "tool", def.Name)
				continue
			}
		}
		if err := out.Add(&def); err != nil {
			m.log.Warn("left out an MCP tool", "session", id, "tool", def.Name, "err", err)
		}
	}
	return out, closeAll, nil
}

// RedactMCPServers returns doc (a session request, an environment, an
// agent, a schedule's template) with the values of every mcp_servers
// entry's env and headers replaced by [api.RedactedValue]: they may be
// secrets, and are never shown back. A document without mcp_servers is
// returned as it is.
func RedactMCPServers(doc json.RawMessage) json.RawMessage { return redactMCP(doc) }

// RestoreRedactedMCPServers returns doc, a definition about to replace
// old, with each MCP server's redacted env and header values (as
// RedactMCPServers answers them) given back their values in old, so
// that a definition read back and sent again keeps its secrets.
func RestoreRedactedMCPServers(doc, old json.RawMessage) json.RawMessage {
	return restoreRedacted(doc, old)
}

func redactMCP(doc json.RawMessage) json.RawMessage {
	if !bytes.Contains(doc, []byte(`"mcp_servers"`)) {
		return doc
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return doc
	}
	if !redactValue(v, false) {
		return doc
	}
	out, err := json.Marshal(v)
	if err != nil {
		return doc
	}
	return out
}

// redactValue redacts what v holds; inServers says v is an mcp_servers
// list. It reports whether it changed anything.
func redactValue(v any, inServers bool) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if inServers {
			for _, f := range []string{"env", "headers"} {
				if vals, ok := x[f].(map[string]any); ok {
					for k := range vals {
						vals[k] = api.RedactedValue
						changed = true
					}
				}
			}
			return changed
		}
		for k, val := range x {
			if redactValue(val, k == "mcp_servers") {
				changed = true
			}
		}
	case []any:
		for _, val := range x {
			if redactValue(val, inServers) {
				changed = true
			}
		}
	}
	return changed
}

// restoreRedacted returns doc with each env or header value of an
// mcp_servers entry that is [api.RedactedValue] replaced by the value
// the entry of the same name had in old (the stored definition), so that
// a definition read back and sent again (PUT, the web page's editor)
// keeps its secrets. A name old gives different values in two places is
// left as it is, and so refused (see validateMCPServer).
func restoreRedacted(doc, old json.RawMessage) json.RawMessage {
	if !bytes.Contains(doc, []byte(api.RedactedValue)) || !bytes.Contains(old, []byte(`"mcp_servers"`)) {
		return doc
	}
	var prev any
	if json.Unmarshal(old, &prev) != nil {
		return doc
	}
	known := map[string]map[string]any{} // name -> the server, nil when ambiguous
	collectServers(prev, false, known)
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return doc
	}
	if !restoreValue(v, false, known) {
		return doc
	}
	out, err := json.Marshal(v)
	if err != nil {
		return doc
	}
	return out
}

// collectServers records the mcp_servers entries v holds by name.
func collectServers(v any, inServers bool, known map[string]map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if inServers {
			name, _ := x["name"].(string)
			if prev, seen := known[name]; seen && (prev == nil || !sameSecrets(prev, x)) {
				known[name] = nil
			} else if !seen {
				known[name] = x
			}
			return
		}
		for k, val := range x {
			collectServers(val, k == "mcp_servers", known)
		}
	case []any:
		for _, val := range x {
			collectServers(val, inServers, known)
		}
	}
}

// sameSecrets reports whether two servers have the same env and headers.
func sameSecrets(a, b map[string]any) bool {
	x, _ := json.Marshal([]any{a["env"], a["headers"]})
	y, _ := json.Marshal([]any{b["env"], b["headers"]})
	return bytes.Equal(x, y)
}

// restoreValue puts the known values in place of redacted ones in v.
func restoreValue(v any, inServers bool, known map[string]map[string]any) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if inServers {
			name, _ := x["name"].(string)
			prev := known[name]
			if prev == nil {
				return false
			}
			for _, f := range []string{"env", "headers"} {
				vals, _ := x[f].(map[string]any)
				was, _ := prev[f].(map[string]any)
				for k, val := range vals {
					if val == api.RedactedValue {
						if old, ok := was[k].(string); ok {
							vals[k] = old
							changed = true
						}
					}
				}
			}
			return changed
		}
		for k, val := range x {
			if restoreValue(val, k == "mcp_servers", known) {
				changed = true
			}
		}
	case []any:
		for _, val := range x {
			if restoreValue(val, inServers, known) {
				changed = true
			}
		}
	}
	return changed
}

// Bounds of what a run is told of the servers left out of it.
const (
	maxMCPReason     = 1000 // the error_event's reason
	maxMCPNoteReason = 300  // the model's note's
)

// takeMCPFailures returns the servers the last mount of session id left
// out, and forgets them.
func (m *Manager) takeMCPFailures(id string) []mcpFailure {
	v, ok := m.mcpFailed.LoadAndDelete(id)
	if !ok {
		return nil
	}
	return v.([]mcpFailure)
}

// mcpFailureEvents are the error_events (origin "mcp") of the servers a
// run left out: one each.
func mcpFailureEvents(failed []mcpFailure) []store.Event {
	evs := make([]store.Event, 0, len(failed))
	for _, f := range failed {
		evs = append(evs, agentEvent(AgentEventData{Kind: KindError, Origin: "mcp",
			Error: fmt.Sprintf("MCP server %q is not available in this run, which goes on without its tools (%s__*): %s", f.Server, f.Server, clip(f.Reason, maxMCPReason))}))
	}
	return evs
}

// mcpFailureNote is what the model reads of the servers a run left out,
// so that it does not call their tools; nil when none was.
func mcpFailureNote(failed []mcpFailure) []llm.Message {
	if len(failed) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("[Note from hrns, not from the user] These MCP servers could not be reached when this run started, so their tools are not available now; do not call them:")
	for _, f := range failed {
		fmt.Fprintf(&b, "\n- %s (tools %s__*): %s", f.Server, f.Server, clip(f.Reason, maxMCPNoteReason))
	}
	return []llm.Message{llm.UserMessage(b.String())}
}

// clip cuts s to at most n bytes, on a rune boundary, saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// scrubSecrets returns msg, an error about server s that the session's
// log and model will read, without its env and header values nor its
// URL's query, whatever Mount put in it.
func scrubSecrets(s *MCPServer, msg string) string {
	var secrets []string
	for _, vals := range []map[string]string{s.Env, s.Headers} {
		for _, v := range vals {
			secrets = append(secrets, v)
		}
	}
	if s.URL != nil {
		if u, err := url.Parse(*s.URL); err == nil {
			secrets = append(secrets, u.RawQuery, u.Query().Encode(), u.Fragment)
			if q, err := url.QueryUnescape(u.RawQuery); err == nil {
				secrets = append(secrets, q)
			}
		}
	}
	// The longest first, so that a value holding another goes whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		if len(v) >= 3 {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}
