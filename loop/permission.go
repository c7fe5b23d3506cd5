package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
)

// Access says what a tool's calls may change, for the permission modes (see
// [PermissionMode]).
type Access uint8

// Accesses.
const (
	// AccessUnknown is the zero value: the tool is taken to change
	// things (it is refused in plan mode).
	AccessUnknown Access = iota
	// AccessRead marks a tool that changes nothing the user keeps: it
	// reads files, lists, searches, fetches a page, delegates to an
	// agent whose own calls are checked.
	AccessRead
	// AccessEdit marks a tool that writes or edits files.
	AccessEdit
	// AccessExecute marks a tool that runs commands or programs.
	AccessExecute
)

func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessEdit:
		return "edit"
	case AccessExecute:
		return "execute"
	}
	return "unknown"
}

// SubjectKind says how permission rules match a tool's [Subject] argument.
type SubjectKind string

// Subject kinds.
const (
	// SubjectCommand: a shell command line, matched by command prefix.
	SubjectCommand SubjectKind = "command"
	// SubjectPath: a file path, matched by a glob.
	SubjectPath SubjectKind = "path"
	// SubjectURL: a URL, matched by domain or by a glob.
	SubjectURL SubjectKind = "url"
)

// Subject names the argument of a tool that permission rules match, and
// how they match it. The argument must be a string; a call without it has
// no subject and matches only rules without a pattern.
type Subject struct {
	Kind SubjectKind
	// Argument is the name of the argument in the arguments object.
	Argument string
	// Parser takes the argument apart when Kind is [SubjectCommand], and
	// is required then (cmdline.Subject, from package
	// github.com/hrns-dev/hrns/loop/cmdline, sets it): without one,
	// [Toolset.Add] refuses the tool and [Permissions.Check] takes each
	// call as a command line that does not parse ([ErrNoCommandParser]).
	// Other kinds ignore it.
	Parser CommandParser
}

// PermissionMode is how the permission policy treats calls that no rule
// decides. The names are Claude Code's.
type PermissionMode string

// Permission modes.
const (
	// ModeDefault runs tools that do not require approval and asks the
	// approver about those that do (ToolDef.RequiresApproval). The empty
	// mode is the default mode.
	ModeDefault PermissionMode = "default"
	// ModeAcceptEdits is the default mode, except that tools with
	// [AccessEdit] run without asking.
	ModeAcceptEdits PermissionMode = "acceptEdits"
	// ModePlan runs only tools with [AccessRead]; any other call is
	// refused with a message asking the model to present its plan.
	ModePlan PermissionMode = "plan"
	// ModeBypass runs every call that no hook or deny rule refuses,
	// without asking.
	ModeBypass PermissionMode = "bypassPermissions"
)

// ParsePermissionMode returns the mode named s: default, acceptEdits, plan
// or bypassPermissions.
func ParsePermissionMode(s string) (PermissionMode, error) {
	switch m := PermissionMode(s); m {
	case ModeDefault, ModeAcceptEdits, ModePlan, ModeBypass:
		return m, nil
	case "":
		return ModeDefault, nil
	}
	return "", fmt.Errorf("unknown permission mode %q: use default, acceptEdits, plan or bypassPermissions", s)
}

// A Rule matches calls of tools by name and, optionally, by argument.
//
// Written as text (see [ParseRule]) a rule is TOOL or TOOL(PATTERN), where
// TOOL is a tool name or a glob of names (path.Match syntax: mcp_* ,
// *). PATTERN is matched against the tool's [Subject]:
//   - a command (run_command): words, matching a command whose words are
//     those words; ending in :* or " *", matching a command whose words
//     start with them ("git status:*" matches "git status --short"). A
//     command line matches an allow rule only if every simple command in
//     it matches one of the allow rules and it holds nothing that could
//     run anything else ([ParsedCommand.Opaque]); it matches a deny rule if
//     any of its simple commands does, or if it cannot be parsed.
//   - a path (read_file, write_file, edit_file): a glob over the cleaned
//     path, in which * matches within one path segment and ** any number
//     of segments ("src/**", "**/.env").
//   - a URL (web_fetch): domain:HOST, matching HOST and its subdomains,
//     or a glob over the URL in which * matches anything.
//
// A rule with a pattern never matches a tool without a subject.
type Rule struct {
	// Tool is a tool name or a glob of names.
	Tool string
	// Pattern matches the call's subject; empty matches every call.
	Pattern string
}

// String writes the rule as [ParseRule] reads it.
func (r Rule) String() string {
	if r.Pattern == "" {
		return r.Tool
	}
	return r.Tool + "(" + r.Pattern + ")"
}

// ParseRule reads a rule written TOOL or TOOL(PATTERN) (see [Rule]).
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	name, pattern, hasPattern := strings.Cut(s, "(")
	r := Rule{Tool: strings.TrimSpace(name)}
	if hasPattern {
		p, ok := strings.CutSuffix(pattern, ")")
		if !ok {
			return Rule{}, fmt.Errorf("rule %q: the pattern opened with ( must end with )", s)
		}
		r.Pattern = strings.TrimSpace(p)
		if r.Pattern == "" {
			return Rule{}, fmt.Errorf("rule %q: empty pattern (write the tool name alone to match every call)", s)
		}
	}
	if r.Tool == "" {
		return Rule{}, fmt.Errorf("rule %q: no tool name", s)
	}
	if _, err := path.Match(r.Tool, ""); err != nil {
		return Rule{}, fmt.Errorf("rule %q: bad tool pattern: %w", s, err)
	}
	return r, nil
}

// Permissions is a permission policy: a mode and rules. Every call of a
// run (a model's call, a call made through [Toolset.Invoke] from inside a
// run, a sub-agent's call) is decided by the same evaluation, in this
// order, the first step that decides winning:
//
//  1. hooks (Options.Hooks, event [HookPreTool]): deny, allow, or ask
//     (which skips steps 3 and 4);
//  2. deny rules: a match refuses the call; then ask rules: a match
//     leaves the decision to the approver (step 5), in every mode but
//     bypassPermissions;
//  3. the mode: bypassPermissions allows; plan refuses tools that are not
//     [AccessRead]; acceptEdits allows [AccessEdit] tools; a tool that
//     does not require approval is allowed;
//  4. allow rules: a match allows the call;
//  5. the approver (Options.Approver): approve, reject, defer or cancel;
//     with none the call is refused.
//
// Mode, Deny and Allow are set before the policy is used; [Permissions.AddAllow]
// adds allow rules while runs go on (a person's "always" answer), and
// [Permissions.SetMode] changes the mode (a person cycling it in the
// chat). A nil *Permissions is the default mode without rules.
type Permissions struct {
	Mode  PermissionMode
	Deny  []Rule
	Allow []Rule
	// Ask rules send the calls they match to the approver even when the
	// mode or an allow rule would run them (not in bypassPermissions).
	// A command matches as for deny rules: if any command in it does.
	Ask []Rule

	mu    sync.RWMutex
	added []Rule
}

// AddAllow adds allow rules; it is safe to call while runs use p.
func (p *Permissions) AddAllow(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.added = append(p.added, rules...)
}

// SetMode changes the mode; it is safe to call while runs use p. The
// calls decided after it returns follow m.
func (p *Permissions) SetMode(m PermissionMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Mode = m
}

// CurrentMode returns the mode in force ([ModeDefault] when none is set);
// it is safe to call while [Permissions.SetMode] changes it. A nil
// *Permissions is in the default mode.
func (p *Permissions) CurrentMode() PermissionMode {
	if p == nil {
		return ModeDefault
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.Mode == "" {
		return ModeDefault
	}
	return p.Mode
}

// Validate checks the mode and every rule.
func (p *Permissions) Validate() error {
	if p == nil {
		return nil
	}
	if _, err := ParsePermissionMode(string(p.CurrentMode())); err != nil {
		return err
	}
	for _, r := range slices.Concat(p.Deny, p.Allow, p.Ask) {
		if _, err := ParseRule(r.String()); err != nil {
			return err
		}
	}
	return nil
}

// PermissionStep names the step of the evaluation that decided a call.
type PermissionStep string

// Steps, in evaluation order.
const (
	StepHook      PermissionStep = "hook"
	StepDenyRule  PermissionStep = "deny_rule"
	StepAskRule   PermissionStep = "ask_rule"
	StepMode      PermissionStep = "mode"
	StepAllowRule PermissionStep = "allow_rule"
	StepApprover  PermissionStep = "approver"
)

// Behavior is what a permission decision does with a call.
type Behavior string

// Behaviors.
const (
	Allow Behavior = "allow"
	Deny  Behavior = "deny"
	Ask   Behavior = "ask"
)

// A PermissionDecision is the outcome of the evaluation for one call, with
// the step that decided it. Approval requests and refusals carry it in
// their chunk (Chunk.Permission).
type PermissionDecision struct {
	Behavior Behavior       `json:"behavior"`
	Step     PermissionStep `json:"step"`
	// Rule is the rule that matched, at the rule steps; the hook's name
	// at the hook step; the mode at the mode step.
	Rule string `json:"rule,omitempty"`
	// Reason says why, in words the model and a person can read.
	Reason string `json:"reason,omitempty"`
}

// Check runs steps 2 to 4 of the evaluation (deny rules, mode, allow rules)
// for a call of def with args, the validated arguments. An Ask decision
// means the approver decides (step 5). Hooks are not run: see [Permissions]
// for the whole order.
func (p *Permissions) Check(def *ToolDef, args json.RawMessage) PermissionDecision {
	return p.check(def, args, false)
}

// check is Check; hookAsked skips the mode and the allow rules.
func (p *Permissions) check(def *ToolDef, args json.RawMessage, hookAsked bool) PermissionDecision {
	if p == nil {
		if !def.RequiresApproval && !hookAsked {
			return PermissionDecision{Behavior: Allow, Step: StepMode, Rule: string(ModeDefault)}
		}
		return PermissionDecision{Behavior: Ask, Step: StepApprover}
	}
	p.mu.RLock()
	deny, allow, mode := p.Deny, slices.Concat(p.Allow, p.added), p.Mode
	p.mu.RUnlock()
	subj := subjectOf(def, args)
	for _, r := range deny {
		if r.matches(def.Name, subj, true) {
			reason := fmt.Sprintf("the call to tool %q is denied by the rule %s", def.Name, r)
			if subj.err != nil && r.Pattern != "" {
				// Matched because the command could not be taken apart.
				reason += fmt.Sprintf(": the command cannot be checked (%v)", subj.err)
			}
			return PermissionDecision{Behavior: Deny, Step: StepDenyRule, Rule: r.String(), Reason: reason}
		}
	}
	if hookAsked {
		return PermissionDecision{Behavior: Ask, Step: StepApprover}
	}
	if mode == "" {
		mode = ModeDefault
	}
	if mode != ModeBypass {
		for _, r := range p.Ask {
			if r.matches(def.Name, subj, true) {
				return PermissionDecision{Behavior: Ask, Step: StepAskRule, Rule: r.String(),
					Reason: fmt.Sprintf("the rule %s asks for a decision on each call", r)}
			}
		}
	}
	switch {
	case mode == ModeBypass:
		return PermissionDecision{Behavior: Allow, Step: StepMode, Rule: string(mode)}
	case mode == ModePlan && def.Access != AccessRead:
		return PermissionDecision{Behavior: Deny, Step: StepMode, Rule: string(mode), Reason: planRefusal(def.Name)}
	case mode == ModeAcceptEdits && def.Access == AccessEdit && !subj.configuresPrograms():
		return PermissionDecision{Behavior: Allow, Step: StepMode, Rule: string(mode)}
	case !def.RequiresApproval:
		return PermissionDecision{Behavior: Allow, Step: StepMode, Rule: string(mode)}
	}
	for _, r := range allow {
		if r.Pattern == "" && subj.configuresPrograms() {
			continue // only a rule naming the path allows it
		}
		if r.matches(def.Name, subj, false) {
			return PermissionDecision{Behavior: Allow, Step: StepAllowRule, Rule: r.String()}
		}
	}
	if subj.cmd != nil && len(subj.cmd.Commands) > 1 && subj.cmd.Opaque == "" {
		// Each simple command may be allowed by a different rule.
		if r, ok := allowEach(def.Name, subj.cmd, allow); ok {
			return PermissionDecision{Behavior: Allow, Step: StepAllowRule, Rule: r}
		}
	}
	return PermissionDecision{Behavior: Ask, Step: StepApprover}
}

func planRefusal(tool string) string {
	return fmt.Sprintf("tool %q was not run: the agent is in plan mode, where only read-only tools run. "+
		"Do not try to make changes: present your plan to the user, and wait for them to approve it before changing anything", tool)
}

// subject is a call's subject, parsed.
type subject struct {
	kind     SubjectKind
	value    string
	hasValue bool           // the call has the argument, as a string
	cmd      *ParsedCommand // for commands that parse
	err      error          // for commands that do not
}

func subjectOf(def *ToolDef, args json.RawMessage) subject {
	s := subject{kind: def.Subject.Kind}
	if def.Subject.Argument == "" || s.kind == "" {
		return s
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return s
	}
	if json.Unmarshal(m[def.Subject.Argument], &s.value) != nil {
		return s
	}
	s.hasValue = true
	if s.kind == SubjectCommand {
		s.cmd, s.err = parseCommand(def.Subject.Parser, s.value)
	}
	return s
}

// configuresPrograms reports whether s is a path that configures what
// programs run ([ConfiguresPrograms]).
func (s subject) configuresPrograms() bool {
	return s.kind == SubjectPath && s.hasValue && ConfiguresPrograms(s.value)
}

// ConfiguresPrograms reports whether writing the file at p (a path as a
// file tool takes it: relative to its directory, or absolute; / or \
// separated; compared without regard to case, as some file systems do)
// can change what a program run in the directory executes, though the
// program itself is not changed: git's repository (.git, a directory or
// the file that points to one, and everything in it: config and its
// core.fsmonitor, core.pager, diff and filter drivers, hooks, info), at
// any depth; .gitattributes and .gitmodules (which name the drivers and
// submodules those run); Mercurial's .hg; direnv's .envrc; hrns's own
// project folder .hrns and Claude Code's .claude (hooks, tools, settings).
//
// acceptEdits does not allow an edit of such a path, nor does an allow
// rule without a pattern: only an allow rule whose pattern matches the
// path, or bypassPermissions, runs it without asking. Files whose purpose
// is to be run (sources, tests, Makefile, package.json scripts) are not
// in the list: an allow rule for a build or test command runs what the
// model writes in them.
func ConfiguresPrograms(p string) bool {
	p = strings.ToLower(path.Clean(strings.ReplaceAll(p, `\`, "/")))
	segs := strings.Split(p, "/")
	for _, s := range segs {
		switch s {
		case ".git", ".hg", ".hrns", ".claude":
			return true
		}
	}
	switch segs[len(segs)-1] {
	case ".gitattributes", ".gitmodules", ".envrc":
		return true
	}
	return false
}

// matches reports whether r matches a call of tool with subject s; deny
// says which way an undecidable subject falls (a command that does not
// parse matches every deny rule of its tool and no allow rule).
func (r Rule) matches(tool string, s subject, deny bool) bool {
	if ok, _ := path.Match(r.Tool, tool); !ok {
		return false
	}
	if r.Pattern == "" {
		return true
	}
	if !s.hasValue {
		return false
	}
	switch s.kind {
	case SubjectCommand:
		if s.err != nil {
			return deny
		}
		if deny {
			for _, c := range s.cmd.Commands {
				if commandMatches(r.Pattern, c, true) {
					return true
				}
			}
			return false
		}
		return s.cmd.Opaque == "" && len(s.cmd.Commands) == 1 && commandMatches(r.Pattern, s.cmd.Commands[0], false)
	case SubjectPath:
		match, ok := pathMatches(r.Pattern, s.value)
		if !ok {
			return deny // too costly to decide: refuse, never allow
		}
		return match
	case SubjectURL:
		return urlMatches(r.Pattern, s.value)
	}
	return false
}

// allowEach reports whether every command of pc matches one of the allow
// rules of tool, and names them.
func allowEach(tool string, pc *ParsedCommand, allow []Rule) (string, bool) {
	var used []string
	for _, c := range pc.Commands {
		found := false
		for _, r := range allow {
			if ok, _ := path.Match(r.Tool, tool); ok && r.Pattern != "" && commandMatches(r.Pattern, c, false) {
				found = true
				if !slices.Contains(used, r.String()) {
					used = append(used, r.String())
				}
				break
			}
		}
		if !found {
			return "", false
		}
	}
	return strings.Join(used, ", "), true
}

// commandMatches reports whether the words of cmd match pattern. For a deny
// rule, a command matches from its first word that is not a constant on
// (it could be any words: `git $X` matches git push:*; a name that is not
// a constant matches every rule), and a path is matched by its last
// element ("/bin/rm" is rm).
func commandMatches(pattern string, cmd []string, deny bool) bool {
	prefix := false
	if p, ok := strings.CutSuffix(pattern, ":*"); ok {
		pattern, prefix = p, true
	} else if p, ok := strings.CutSuffix(pattern, " *"); ok {
		pattern, prefix = p, true
	}
	want := strings.Fields(pattern)
	if len(want) == 0 || len(cmd) == 0 {
		return prefix && len(want) == 0
	}
	if deny {
		if cmd[0] == "" {
			return true
		}
		if i := strings.LastIndexByte(cmd[0], '/'); i >= 0 && !strings.Contains(want[0], "/") {
			cmd = slices.Concat([]string{cmd[0][i+1:]}, cmd[1:])
		}
		// A word that is not a constant may be any words, or none:
		// from there on, the command could be the pattern's.
		for i, w := range want {
			switch {
			case i >= len(cmd):
				return false
			case cmd[i] == "":
				return true
			case cmd[i] != w:
				return false
			}
		}
		// Words past the pattern's that are not constants may be none.
		return prefix || !slices.ContainsFunc(cmd[len(want):], func(w string) bool { return w != "" })
	}
	if len(cmd) < len(want) || !prefix && len(cmd) != len(want) {
		return false
	}
	for i, w := range want {
		if cmd[i] != w {
			return false
		}
	}
	return true
}

// pathMatches matches a cleaned path against a glob in which ** matches any
// number of segments. ok is false when the match took more steps than
// allowed (a hostile pattern or path): the caller decides which way that
// falls.
func pathMatches(pattern, p string) (match, ok bool) {
	p = path.Clean(strings.ReplaceAll(p, `\`, "/"))
	pattern = path.Clean(pattern)
	if strings.HasPrefix(pattern, "/") != strings.HasPrefix(p, "/") {
		return false, true
	}
	pat := strings.Split(strings.Trim(pattern, "/"), "/")
	// Consecutive ** are one.
	pat = slices.CompactFunc(pat, func(a, b string) bool { return a == "**" && b == "**" })
	budget := maxGlobSteps
	match = globSegments(pat, strings.Split(strings.Trim(p, "/"), "/"), &budget)
	return match, budget > 0
}

// maxGlobSteps bounds the backtracking of ** over one path.
const maxGlobSteps = 100000

func globSegments(pat, segs []string, budget *int) bool {
	for len(pat) > 0 {
		if *budget--; *budget <= 0 {
			return false
		}
		if pat[0] == "**" {
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if globSegments(pat[1:], segs[i:], budget) {
					return true
				}
				if *budget <= 0 {
					return false
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// urlMatches matches a URL against domain:HOST or a glob in which * matches
// anything.
func urlMatches(pattern, raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if d, ok := strings.CutPrefix(pattern, "domain:"); ok {
		d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		return host == d || strings.HasSuffix(host, "."+d)
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	return wildcard(pattern, u.String())
}

// wildcard matches s against a pattern in which * matches any run of
// characters, without recursion (at worst len(pattern)·len(s) steps).
func wildcard(pattern, s string) bool {
	px, sx, star, mark := 0, 0, -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && pattern[px] == '*':
			star, mark = px, sx
			px++
		case px < len(pattern) && pattern[px] == s[sx]:
			px++
			sx++
		case star >= 0:
			px, mark = star+1, mark+1
			sx = mark
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

// ErrPermission is wrapped by the error of a tool_call_error chunk whose
// call the permission policy refused (a hook, a deny rule, the plan mode).
var ErrPermission = errors.New("permission denied")
