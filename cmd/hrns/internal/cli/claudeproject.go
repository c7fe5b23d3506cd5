package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/loop"
)

// Claude Code's project files, read for people who come from it:
//
//   - .claude/settings.json and .claude/settings.local.json: permissions
//     (allow, ask, deny, defaultMode) and hooks;
//   - .mcp.json: MCP servers (mcpServers).
//
// (.claude/skills is a skills root: see skillRoots.) They come with the
// repository, so they get the trust rules of .hrns/config.toml: what can
// only restrict (deny and ask rules, the plan mode) applies at once; what
// loosens the policy or starts programs and reaches endpoints (allow
// rules, another mode, hooks, MCP servers) applies only once the person
// agreed to it, shown whole, remembered per file and content. A run
// without a terminal, or with --json, leaves those parts out and says
// so, unless --trust-project.

// claudeFileLimit bounds each file read.
const claudeFileLimit = 1 << 20

// claudeFile is one of Claude Code's files found in the project, with what
// in it needs the person's agreement.
type claudeFile struct {
	path  string // absolute
	sum   string // SHA-256 of its content, hex
	asks  []string
	allow []string
	mode  string
	hooks map[string][]HookConfig
	mcp   map[string]MCPServer
}

// claudeProject is what the project's Claude Code files hold.
type claudeProject struct {
	files []*claudeFile
	// notes say what could not be taken over, for the person.
	notes []string
}

// claudeSettings is the part of Claude Code's settings.json hrns reads.
type claudeSettings struct {
	Permissions struct {
		Allow       []string `json:"allow"`
		Ask         []string `json:"ask"`
		Deny        []string `json:"deny"`
		DefaultMode string   `json:"defaultMode"`
	} `json:"permissions"`
	Hooks map[string][]struct {
		Matcher string `json:"matcher"`
		Hooks   []struct {
			Type    string  `json:"type"`
			Command string  `json:"command"`
			Timeout float64 `json:"timeout"`
		} `json:"hooks"`
	} `json:"hooks"`
}

// claudeMCP is Claude Code's .mcp.json.
type claudeMCP struct {
	Servers map[string]struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	} `json:"mcpServers"`
}

// claudeTools maps Claude Code's tool names to hrns's.
var claudeTools = map[string]string{
	"Bash":      "run_command",
	"Read":      "read_file",
	"Write":     "write_file",
	"Edit":      "edit_file",
	"MultiEdit": "edit_file",
	"Glob":      "list_files",
	"LS":        "list_files",
	"Grep":      "grep",
	"WebFetch":  "web_fetch",
	"TodoWrite": "todo_write",
}

// claudeRule translates a Claude Code permission rule into hrns's. strict
// (deny and ask rules) widens a rule whose pattern has no translation to
// the whole tool, so that nothing meant to be refused is let through; an
// allow rule with no translation is dropped (ok false).
func claudeRule(s string, strict bool) (rule string, ok bool) {
	rule, ok = translateClaudeRule(s, strict)
	if !ok {
		return "", false
	}
	return rule, true
}

func translateClaudeRule(s string, strict bool) (rule string, ok bool) {
	s = strings.TrimSpace(s)
	name, pattern, hasPattern := strings.Cut(s, "(")
	name = strings.TrimSpace(name)
	var tool string
	switch {
	case strings.HasPrefix(name, "mcp__"):
		// mcp__server__tool, mcp__server: hrns names an MCP server's
		// tools server__tool.
		rest := strings.TrimPrefix(name, "mcp__")
		if server, t, found := strings.Cut(rest, "__"); found {
			tool = server + "__" + t
		} else {
			tool = rest + "__*"
		}
		if hasPattern {
			return tool, strict
		}
		return tool, true
	default:
		tool = claudeTools[name]
	}
	if tool == "" {
		return "", false
	}
	if !hasPattern {
		return tool, true
	}
	p, closed := strings.CutSuffix(strings.TrimSpace(pattern), ")")
	p = strings.TrimSpace(p)
	if !closed || p == "" {
		return tool, strict
	}
	switch tool {
	case "read_file", "write_file", "edit_file", "list_files", "grep":
		switch {
		case strings.HasPrefix(p, "//"): // absolute
			p = p[1:]
		case strings.HasPrefix(p, "~/"):
			return tool, strict // the home: no rule of hrns's names it
		case strings.HasPrefix(p, "./"):
			p = p[2:]
		case strings.HasPrefix(p, "/"): // relative to the settings' project
			p = p[1:]
		}
		if p == "" {
			return tool, true
		}
	}
	rule = tool + "(" + p + ")"
	if _, err := loop.ParseRule(rule); err != nil {
		return tool, strict
	}
	return rule, true
}

// claudeMatcher translates a hook matcher (tool names joined by |, "" or
// "*" for all) into hrns's names.
func claudeMatcher(m string) string {
	m = strings.TrimSpace(m)
	if m == "" || m == "*" {
		return ""
	}
	var out []string
	for _, n := range strings.Split(m, "|") {
		n = strings.TrimSpace(n)
		if t, ok := claudeTools[n]; ok {
			n = t
		} else if rest, ok := strings.CutPrefix(n, "mcp__"); ok {
			n = rest // mcp__server__tool is hrns's server__tool
			if !strings.Contains(rest, "__") {
				n = rest + "__*"
			}
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return strings.Join(out, "|")
}

// findClaudeFiles returns the paths of Claude Code's files that apply to
// workdir, relative to the directory they are read inside (top): each the
// nearest of the workdir and its parents up to the repository's root.
func findClaudeFiles(workdir string) (top string, rels []string, err error) {
	dirs, err := projectDirs(workdir)
	if err != nil {
		return "", nil, err
	}
	top = dirs[len(dirs)-1]
	for _, name := range []string{filepath.Join(".claude", "settings.json"), filepath.Join(".claude", "settings.local.json"), ".mcp.json"} {
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if _, err := os.Lstat(p); err == nil {
				rel, err := filepath.Rel(top, p)
				if err != nil {
					return "", nil, err
				}
				rels = append(rels, rel)
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return "", nil, fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	return top, rels, nil
}

// readClaudeProject reads the project's Claude Code files. What restricts
// (deny and ask rules, the plan mode when the user's config sets none)
// goes into c at once; the rest is returned for trustProject.
func (c *Config) readClaudeProject(workdir string) (*claudeProject, error) {
	top, rels, err := findClaudeFiles(workdir)
	if err != nil || len(rels) == 0 {
		return nil, err
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	cp := &claudeProject{}
	for _, rel := range rels {
		path := filepath.Join(top, rel)
		data, err := readInRoot(root, rel, claudeFileLimit)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		sum := sha256.Sum256([]byte(data))
		f := &claudeFile{path: path, sum: hex.EncodeToString(sum[:])}
		if filepath.Base(rel) == ".mcp.json" {
			err = c.readClaudeMCP(f, []byte(data))
		} else {
			err = c.readClaudeSettings(f, cp, []byte(data))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(f.asks) > 0 {
			cp.files = append(cp.files, f)
		}
	}
	return cp, nil
}

// decodeJSON decodes one JSON value, refusing trailing data.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

func (c *Config) readClaudeSettings(f *claudeFile, cp *claudeProject, data []byte) error {
	var s claudeSettings
	if err := decodeJSON(data, &s); err != nil {
		return err
	}
	where := safetext.Escape(f.path)
	for _, r := range s.Permissions.Deny {
		if rule, ok := claudeRule(r, true); ok {
			c.Permissions.Deny = append(c.Permissions.Deny, rule)
		} else {
			cp.notes = append(cp.notes, fmt.Sprintf("%s: deny rule %q names no tool of hrns's: left out", where, r))
		}
	}
	for _, r := range s.Permissions.Ask {
		if rule, ok := claudeRule(r, true); ok {
			c.Permissions.Ask = append(c.Permissions.Ask, rule)
		} else {
			cp.notes = append(cp.notes, fmt.Sprintf("%s: ask rule %q names no tool of hrns's: left out", where, r))
		}
	}
	for _, r := range s.Permissions.Allow {
		rule, ok := claudeRule(r, false)
		if !ok {
			cp.notes = append(cp.notes, fmt.Sprintf("%s: allow rule %q has no equivalent in hrns: left out", where, r))
			continue
		}
		f.allow = append(f.allow, rule)
		f.asks = append(f.asks, "allow "+rule+" without asking")
	}
	switch m := s.Permissions.DefaultMode; m {
	case "", "default":
	case "plan":
		if c.Permissions.Mode == "" {
			c.Permissions.Mode = m
		}
	case "acceptEdits", "bypassPermissions":
		f.mode = m
		f.asks = append(f.asks, "the permission mode "+m)
	default:
		cp.notes = append(cp.notes, fmt.Sprintf("%s: defaultMode %q is not a mode of hrns's: left out", where, m))
	}
	for _, event := range slices.Sorted(maps.Keys(s.Hooks)) {
		if _, ok := hookEvent(event); !ok {
			cp.notes = append(cp.notes, fmt.Sprintf("%s: hooks of %q, an event hrns does not have: left out", where, event))
			continue
		}
		for _, group := range s.Hooks[event] {
			for _, h := range group.Hooks {
				if h.Type != "" && h.Type != "command" {
					cp.notes = append(cp.notes, fmt.Sprintf("%s: a %q hook of %s: only command hooks run in hrns: left out", where, h.Type, event))
					continue
				}
				hc := HookConfig{Matcher: claudeMatcher(group.Matcher), Command: h.Command, Timeout: int(h.Timeout)}
				if err := checkHooks(map[string][]HookConfig{event: {hc}}); err != nil {
					return err
				}
				if f.hooks == nil {
					f.hooks = map[string][]HookConfig{}
				}
				f.hooks[event] = append(f.hooks[event], hc)
				on := "every tool"
				if hc.Matcher != "" {
					on = hc.Matcher
				}
				f.asks = append(f.asks, fmt.Sprintf("run the hook %s (%s, on %s)", shownCommand(h.Command), event, on))
			}
		}
	}
	return nil
}

func (c *Config) readClaudeMCP(f *claudeFile, data []byte) error {
	var m claudeMCP
	if err := decodeJSON(data, &m); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(m.Servers)) {
		s := m.Servers[name]
		if !validMCPName(name) {
			return fmt.Errorf("mcpServers: %q is not a name of letters, digits, - and _", name)
		}
		srv := MCPServer{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
		switch s.Type {
		case "", "stdio":
			if s.Command == "" {
				return fmt.Errorf("mcpServers.%s: no command", name)
			}
			srv.URL, srv.Headers = "", nil
			f.asks = append(f.asks, fmt.Sprintf("start the MCP server %q: %s", name, shownCommand(strings.Join(append([]string{s.Command}, s.Args...), " "))))
		case "http", "sse":
			if s.URL == "" {
				return fmt.Errorf("mcpServers.%s: no url", name)
			}
			srv.Command, srv.Args, srv.Env = "", nil, nil
			f.asks = append(f.asks, fmt.Sprintf("connect to the MCP server %q at %s", name, safetext.Escape(s.URL)))
		default:
			return fmt.Errorf("mcpServers.%s: type %q is not stdio, http or sse", name, s.Type)
		}
		for _, kv := range []map[string]string{srv.Env, srv.Headers} {
			for _, k := range slices.Sorted(maps.Keys(kv)) {
				for _, ref := range envRefRE().FindAllStringSubmatch(kv[k], -1) {
					f.asks = append(f.asks, fmt.Sprintf("  and give it the value of your $%s (in %s)", ref[1], safetext.Escape(k)))
				}
			}
		}
		if f.mcp == nil {
			f.mcp = map[string]MCPServer{}
		}
		f.mcp[name] = srv
	}
	return nil
}

// validMCPName reports whether name can name an MCP server's tools.
func validMCPName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// shownCommand shows a command line to a person deciding about it: each
// line of it, escaped, so that nothing hides after a newline or a control
// character.
func shownCommand(cmd string) string {
	lines := strings.Split(cmd, "\n")
	for i, l := range lines {
		lines[i] = safetext.Escape(l)
	}
	if len(lines) == 1 {
		return "`" + lines[0] + "`"
	}
	return fmt.Sprintf("(%d lines) `%s`", len(lines), strings.Join(lines, "⏎"))
}

// apply merges what f asks for into c: the user's own config wins a
// conflict (a mode it sets, an MCP server of the same name).
func (f *claudeFile) apply(c *Config) {
	c.Permissions.Allow = append(c.Permissions.Allow, f.allow...)
	if f.mode != "" && c.Permissions.Mode == "" {
		c.Permissions.Mode = f.mode
	}
	for ev, hs := range f.hooks {
		if c.Hooks == nil {
			c.Hooks = map[string][]HookConfig{}
		}
		c.Hooks[ev] = append(c.Hooks[ev], hs...)
	}
	for name, s := range f.mcp {
		if c.MCP.Servers == nil {
			c.MCP.Servers = map[string]MCPServer{}
		}
		if _, mine := c.MCP.Servers[name]; !mine {
			c.MCP.Servers[name] = s
		}
	}
}

// trustClaude applies the parts of the project's Claude Code files that
// need the person's agreement: remembered for the file's content,
// --trust-project, or asked now on the terminal. Without a terminal (or
// with --json) it leaves them out and says so on stderr.
func (c *Config) trustClaude(o *runOptions, stdio *IO) error {
	cp := c.claude
	if cp == nil {
		return nil
	}
	w := stdio.Err
	if !o.json {
		for _, n := range cp.notes {
			fmt.Fprintf(w, "(%s)\n", n)
		}
	}
	for _, f := range cp.files {
		ok := o.trustProject
		if !ok {
			var err error
			if ok, err = projectTrusted(f.path, f.sum, stdio.getenv); err != nil {
				return usagef("trusted projects: %v", err)
			}
		}
		path := safetext.Escape(f.path)
		if !ok && (o.json || !stdio.interactive()) {
			if !o.json {
				fmt.Fprintf(w, "(%s comes with the repository and asks for more than it may without your agreement (%d items): left out. Run hrns in a terminal here to review it, or pass --trust-project.)\n", path, len(f.asks))
			}
			continue
		}
		if !ok {
			fmt.Fprintf(w, "%s comes with the repository, not from you. It asks hrns to:\n", path)
			for _, a := range f.asks {
				fmt.Fprintf(w, "  %s\n", a)
			}
			fmt.Fprint(w, "Agree to this file for this project (remembered until the file changes)? [y/N] ")
			line, err := readAnswer(stdio.In)
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
				fmt.Fprintf(w, "(not agreed: what %s asks for is left out)\n", path)
				continue
			}
			if err := rememberTrust(f.path, f.sum, f.asks, stdio.getenv); err != nil {
				fmt.Fprintf(w, "(agreed for this run; it could not be remembered: %v)\n", err)
			}
		}
		f.apply(c)
	}
	return nil
}
