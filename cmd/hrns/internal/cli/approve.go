package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/callview"
	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
)

// A call's preview is shown whole up to previewLines display lines; a
// longer one shows its first headLines and says how many are hidden, and
// the call can be allowed only once the person asked to see them all.
const (
	previewLines = 40
	headLines    = 20
)

// termApprover asks the person at the terminal about calls that need
// approval. Without a terminal it refuses them, so a script never hangs
// waiting for an answer nobody will type.
//
// Everything it shows comes from the model or a tool server, so all of it
// (the tool's name, the command, the diff, the content to write) is
// rendered with [safetext]: a control character or an escape sequence
// cannot hide or rewrite what the person approves.
//
// An "always" answer adds an allow rule to the run's permission policy:
// the tool's name, or for run_command the command's prefix (git status:*),
// offered only for a command that such a rule can match (a single command
// with nothing that could run another).
type termApprover struct {
	stdio *IO
	perms *loop.Permissions
	// remember keeps an allow rule for the project (the "r" answer); nil
	// when there is nowhere to keep it.
	remember func(loop.Rule) error
	// mark highlights escapes; nil when stderr is not a terminal.
	mark func(string) string
	// hold, when set, stops whatever else draws on the terminal (the
	// progress line, the run's narration) until release is called: a
	// question is written after hold and stays the last thing on the
	// screen until its answer is read.
	hold func() (release func())

	// asking lets one question at a time on the screen: calls approved
	// at once (a program's capabilities, parallel calls) wait their turn.
	asking chan struct{}

	mu    sync.Mutex
	lines chan typedLine // lines read from stdin by one reader goroutine
}

// A typedLine is a line read from stdin, with when it was read.
type typedLine struct {
	text string
	at   time.Time
}

func newTermApprover(stdio *IO, perms *loop.Permissions) *termApprover {
	a := &termApprover{stdio: stdio, perms: perms, asking: make(chan struct{}, 1)}
	if stdio.errTerminal() && stdio.getenv("NO_COLOR") == "" {
		a.mark = reverseVideo
	}
	return a
}

// reverseVideo highlights an escape on a terminal.
func reverseVideo(s string) string { return "\x1b[7m" + s + "\x1b[27m" }

func (a *termApprover) Approve(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
	select {
	case a.asking <- struct{}{}:
		defer func() { <-a.asking }()
	case <-ctx.Done():
		return loop.Decision{}, ctx.Err()
	}
	if a.hold != nil {
		release := a.hold()
		defer release()
	}
	w := a.stdio.Err
	// What the person typed before this question is not its answer: a
	// line meant for something else (or a key pressed twice) would
	// otherwise allow the call unseen. On a terminal, input not yet read
	// is dropped, and lines read before now are passed over.
	a.dropTypeAhead()
	asked := time.Now()
	if !a.stdio.interactive() {
		fmt.Fprintf(w, "  ✗ %s needs approval and there is no terminal to ask: rerun with --yes to allow it, or allow it with --allow or --permission-mode\n", safetext.Escape(req.Call.Name))
		return loop.Decision{Verdict: loop.Reject, Reason: "it needs approval and hrns is not running in a terminal where a person can approve it " +
			"(the user can rerun with --yes to allow such calls)"}, nil
	}
	opts := &safetext.Options{Mark: a.mark}
	name := a.inline(req.Call.Name)
	rule, canAlways := alwaysRule(req.Call.Name, req.Call.Arguments)
	canAlways = canAlways && a.perms != nil
	p := describeCall(req.Call.Name, req.Call.Arguments, opts)
	if ag := loop.AgentName(ctx); ag != "" {
		// A sub-agent's call (the task tool's): say whose.
		fmt.Fprintf(w, "\nthe sub-agent %s: %s wants to run:\n", a.inline(ag), name)
	} else {
		fmt.Fprintf(w, "\n%s wants to run:\n", name)
	}
	if pd := req.Permission; pd != nil && pd.Step == loop.StepHook {
		// The hook is the operator's, its reason may quote the model.
		fmt.Fprintf(w, "  (the hook %s asks you: %s)\n", a.inline(clip(pd.Rule, 80)), a.inline(clip(pd.Reason, 300)))
	}
	if pd := req.Permission; pd != nil && pd.Step == loop.StepApprover && pd.Reason != "" {
		// The tool asks for a person (a provider's safety check on a
		// computer action); the reason quotes the provider.
		fmt.Fprintf(w, "  ⚠ %s\n", a.inline(clip(pd.Reason, 600)))
	}
	if p.escaped > 0 {
		fmt.Fprintf(w, "  ⚠ %d characters that are invisible or that a terminal would interpret are shown escaped (\\r, \\x1b, \\u202e...)\n", p.escaped)
	}
	if len(p.lookAlikes) > 0 {
		fmt.Fprintf(w, "  ⚠ look-alike letters: these words mix Latin letters with letters of another script that draw the same, as a disguised address does:\n")
		for _, l := range p.lookAlikes {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	hidden := 0
	if len(p.lines) > previewLines {
		hidden = len(p.lines) - headLines
		writeLines(w, p.lines[:headLines])
		fmt.Fprintf(w, "  … %d more lines are not shown (%d in all): answer v to see them all\n", hidden, len(p.lines))
	} else {
		writeLines(w, p.lines)
	}
	for {
		switch {
		case hidden > 0:
			fmt.Fprintf(w, "Allow? [v]iew all %d lines, [n]o: ", len(p.lines))
		case canAlways && a.remember != nil:
			fmt.Fprintf(w, "Allow? [y]es, [n]o, [a]lways allow %s, [r]emember it for this project: ", a.inline(rule.String()))
		case canAlways:
			fmt.Fprintf(w, "Allow? [y]es, [n]o, [a]lways allow %s: ", a.inline(rule.String()))
		default:
			fmt.Fprintf(w, "Allow? [y]es, [n]o: ")
		}
		line, err := a.readLine(ctx, asked)
		if err != nil {
			fmt.Fprintln(w)
			return loop.Decision{}, err
		}
		switch answer := strings.ToLower(strings.TrimSpace(line)); answer {
		case "y", "yes", "a", "always", "r", "remember":
			if hidden > 0 {
				fmt.Fprintf(w, "  %d lines are not shown yet: answer v to see them before allowing the call, or n to refuse it\n", hidden)
				continue
			}
			keep := answer == "r" || answer == "remember"
			if keep && a.remember == nil {
				fmt.Fprintf(w, "  there is nowhere to remember it (no HOME): answer y or a\n")
				continue
			}
			if keep || answer == "a" || answer == "always" {
				if !canAlways {
					fmt.Fprintf(w, "  no rule can allow this call for good: answer y to allow it once\n")
					continue
				}
				a.perms.AddAllow(rule)
				if !keep {
					fmt.Fprintf(w, "  added the allow rule %s for the rest of this run\n", a.inline(rule.String()))
				} else if err := a.remember(rule); err != nil {
					fmt.Fprintf(w, "  added the allow rule %s for this run; remembering it failed: %s\n", a.inline(rule.String()), a.inline(err.Error()))
				} else {
					fmt.Fprintf(w, "  added the allow rule %s, remembered for this project (%s)\n", a.inline(rule.String()), a.inline(rememberedPath(a.stdio.getenv)))
				}
			}
			return loop.Decision{Verdict: loop.Approve}, nil
		case "v", "view":
			fmt.Fprintf(w, "\n%s wants to run (all %d lines):\n", name, len(p.lines))
			writeLines(w, p.lines)
			hidden = 0
		case "n", "no":
			fmt.Fprint(w, "Tell the model why (optional): ")
			reason, _ := a.readLine(ctx, time.Time{})
			reason = strings.TrimSpace(reason)
			if reason == "" {
				reason = "the user said no"
			}
			return loop.Decision{Verdict: loop.Reject, Reason: reason}, nil
		}
	}
}

// inline renders s on one line, escapes marked.
func (a *termApprover) inline(s string) string { return safetext.EscapeMarked(s, a.mark) }

func writeLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// readLine reads a line from stdin, or returns when ctx is done. One
// goroutine reads stdin for the whole run, so an abandoned prompt does not
// leave a reader that steals the next answer. When stdin is a terminal,
// a line read before asked (typed ahead of the question) is passed over,
// and the person told.
func (a *termApprover) readLine(ctx context.Context, asked time.Time) (string, error) {
	a.mu.Lock()
	if a.lines == nil {
		a.lines = make(chan typedLine)
		go func(r io.Reader, lines chan<- typedLine) {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				lines <- typedLine{sc.Text(), time.Now()}
			}
			close(lines)
		}(a.stdio.In, a.lines)
	}
	lines := a.lines
	a.mu.Unlock()
	checkAhead := !asked.IsZero() && a.stdio.inTerminal()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return "", io.EOF
			}
			if checkAhead && line.at.Before(asked) {
				fmt.Fprint(a.stdio.Err, "\n  (a line typed before this question was passed over: answer now) ")
				continue
			}
			return line.text, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// dropTypeAhead discards what was typed on the terminal of stdin and not
// read yet (TCIFLUSH), a line being typed included.
func (a *termApprover) dropTypeAhead() {
	if f, ok := a.stdio.In.(*os.File); ok && a.stdio.inTerminal() {
		flushInput(f.Fd())
	}
}

// preview is what a person is shown of a call before approving it: display
// lines, ready to print, and how many characters in them are escaped.
type preview struct {
	opts    *safetext.Options
	lines   []string
	escaped int
	// lookAlikes are the words shown that mix Latin letters with
	// look-alikes of another script ([safetext.LookAlikes]).
	lookAlikes []string
}

// look notes the look-alike words of s.
func (p *preview) look(s string) {
	if len(p.lookAlikes) < maxLookAlikes {
		p.lookAlikes = append(p.lookAlikes, safetext.LookAlikes(s)...)
		p.lookAlikes = p.lookAlikes[:min(len(p.lookAlikes), maxLookAlikes)]
	}
}

// maxLookAlikes bounds the look-alike words a prompt lists.
const maxLookAlikes = 5

// text adds s, rendered line by line: its first line after first, its
// other lines after next, and the parts of lines too long for one display
// line after cont.
func (p *preview) text(first, next, cont, s string) {
	blk := safetext.Render(s, p.opts)
	p.escaped += blk.Escaped
	p.look(s)
	for i, l := range blk.Lines {
		prefix := next
		switch {
		case l.Continued:
			prefix = cont
		case i == 0:
			prefix = first
		}
		p.lines = append(p.lines, prefix+l.Text)
	}
}

// describeCall shows what a call will do: the command, the program, the
// edit as a diff, the file to write, every line of them; and any other
// argument as JSON.
// The tools decode their arguments with encoding/json into structs, so the
// values shown are decoded the same way: what is shown is what runs.
func describeCall(name string, raw []byte, opts *safetext.Options) *preview {
	p := &preview{opts: opts}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		p.text("  arguments: ", "  ", "  ↪ ", string(raw))
		return p
	}
	shown := map[string]bool{}
	switch name {
	case "run_command":
		var a struct {
			Command string `json:"command"`
		}
		json.Unmarshal(raw, &a)
		p.text("  $ ", "  > ", "  ↪ ", a.Command)
		shown["command"] = true
	case runCodeName:
		// The program, every line of it numbered.
		var a struct {
			Code string `json:"code"`
		}
		json.Unmarshal(raw, &a)
		lines, escaped := callview.Program(a.Code, p.opts)
		p.look(a.Code)
		for _, l := range lines {
			p.lines = append(p.lines, "  "+l.Gutter+l.Text)
		}
		p.escaped += escaped
		shown["code"] = true
	case "edit_file":
		var a struct {
			Path       string `json:"path"`
			OldString  string `json:"old_string"`
			NewString  string `json:"new_string"`
			ReplaceAll bool   `json:"replace_all"`
		}
		json.Unmarshal(raw, &a)
		p.text("  --- ", "  --- ", "  ↪ ", a.Path)
		p.text("  +++ ", "  +++ ", "  ↪ ", a.Path)
		p.text("  -", "  -", "  -↪ ", a.OldString)
		p.text("  +", "  +", "  +↪ ", a.NewString)
		if a.ReplaceAll {
			p.lines = append(p.lines, "  (every occurrence)")
		}
		shown["path"], shown["old_string"], shown["new_string"], shown["replace_all"] = true, true, true, true
	case "write_file":
		var a struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		json.Unmarshal(raw, &a)
		lines := strings.Count(a.Content, "\n")
		if a.Content != "" && !strings.HasSuffix(a.Content, "\n") {
			lines++
		}
		p.text("  write ", "  ", "  ↪ ", fmt.Sprintf("%s (%d bytes, %d lines)", a.Path, len(a.Content), lines))
		if a.Content != "" {
			p.text("  +", "  +", "  +↪ ", strings.TrimSuffix(a.Content, "\n"))
			if !strings.HasSuffix(a.Content, "\n") {
				p.lines = append(p.lines, "  (no newline at the end)")
			}
		}
		shown["path"], shown["content"] = true, true
	}
	// Every other argument, so that nothing the tool gets is left out.
	keys := make([]string, 0, len(args))
	for k := range args {
		if !shown[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p.text("  ", "  ", "  ↪ ", k+": "+string(args[k]))
	}
	return p
}

// errTerminal reports whether stderr is a terminal.
func (s *IO) errTerminal() bool {
	f, ok := s.Err.(*os.File)
	return ok && isTerminal(f.Fd())
}

// alwaysRule is the allow rule an "always" answer adds for a call: the
// tool's name, or for run_command the prefix of its command, its program
// and, when it reads like one, a subcommand (git status:*). ok is false
// when no rule can be made: a command line holding more than one command
// or anything that could run another, which no prefix rule matches.
func alwaysRule(tool string, args []byte) (loop.Rule, bool) {
	if tool != "run_command" {
		return loop.Rule{Tool: tool}, true
	}
	var a struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(args, &a) != nil {
		return loop.Rule{}, false
	}
	pc, err := cmdline.Parse(a.Command)
	if err != nil || pc.Opaque != "" || len(pc.Commands) != 1 {
		return loop.Rule{}, false
	}
	words := pc.Commands[0]
	if !ruleWord(words[0]) {
		return loop.Rule{}, false
	}
	prefix := words[0]
	if len(words) > 1 && subcommand(words[1]) {
		prefix += " " + words[1]
	}
	return loop.Rule{Tool: tool, Pattern: prefix + ":*"}, true
}

// ruleWord reports whether a rule can spell w: no space, no parenthesis.
func ruleWord(w string) bool {
	return w != "" && !strings.ContainsAny(w, " \t\n\r\v\f()") && utf8.ValidString(w)
}

// subcommand reports whether w reads like a subcommand (status, run,
// build-all) rather than an argument (a flag, a path, a file name).
func subcommand(w string) bool {
	if w == "" || len(w) > 32 || w[0] < 'a' || w[0] > 'z' {
		return false
	}
	for _, c := range w {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
