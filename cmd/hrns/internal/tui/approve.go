package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/callview"
	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/loop"
)

// A Rememberer is an [Allower] that can also keep an "always" answer for
// the project, beyond this chat (keys A and P); the chat offers it only
// when its Allower is one.
type Rememberer interface {
	Remember(tool, prefix string) error
}

// An Allower keeps the "always" answers given in the chat's approvals.
//
// The chat asks Allowed before it shows an approval; a call it reports
// allowed runs without asking. AlwaysAllow records an answer: every call
// of tool from now on when prefix is empty, or, for run_command, every
// command that starts with prefix (a whole word sequence, such as
// "go test") and holds no shell operator. A permission policy with rules
// of its own implements this interface to receive the chat's answers; the
// default is a [SessionAllowList], forgotten when the chat ends.
type Allower interface {
	Allowed(tool string, args json.RawMessage) bool
	AlwaysAllow(tool, prefix string) error
}

// SessionAllowList is the default [Allower]: the answers of this chat, in
// memory. It is safe for concurrent use.
type SessionAllowList struct {
	mu       sync.Mutex
	tools    map[string]bool
	prefixes map[string][]string // tool → command prefixes
}

// Allowed implements [Allower].
func (l *SessionAllowList) Allowed(tool string, args json.RawMessage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tools[tool] {
		return true
	}
	if len(l.prefixes[tool]) == 0 {
		return false
	}
	cmd, ok := commandOf(args)
	if !ok {
		return false
	}
	return slices.ContainsFunc(l.prefixes[tool], func(p string) bool { return matchesPrefix(cmd, p) })
}

// AlwaysAllow implements [Allower].
func (l *SessionAllowList) AlwaysAllow(tool, prefix string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prefix == "" {
		if l.tools == nil {
			l.tools = map[string]bool{}
		}
		l.tools[tool] = true
		return nil
	}
	if l.prefixes == nil {
		l.prefixes = map[string][]string{}
	}
	if !slices.Contains(l.prefixes[tool], prefix) {
		l.prefixes[tool] = append(l.prefixes[tool], prefix)
	}
	return nil
}

// commandOf returns the command of run_command's arguments.
func commandOf(args json.RawMessage) (string, bool) {
	var a struct {
		Command *string `json:"command"`
	}
	if json.Unmarshal(args, &a) != nil || a.Command == nil {
		return "", false
	}
	return *a.Command, true
}

// shellOperators are the characters that let one command line run
// another command: a command holding one never matches a prefix.
const shellOperators = ";&|`$()<>\n\r\\"

// matchesPrefix reports whether cmd starts with the words of prefix and
// holds no shell operator.
func matchesPrefix(cmd, prefix string) bool {
	if strings.ContainsAny(cmd, shellOperators) || !safeWords(cmd) {
		return false
	}
	words, pw := strings.Fields(cmd), strings.Fields(prefix)
	return len(pw) > 0 && len(words) >= len(pw) && slices.Equal(words[:len(pw)], pw)
}

// safeWords reports whether s is plain visible text with ASCII spaces.
func safeWords(s string) bool { return !safetext.Unsafe(strings.ReplaceAll(s, " ", "")) }

// commandPrefix proposes the prefix an "always for this command" answer
// allows: the program, and its subcommand when the second word is a plain
// word ("go test ./..." → "go test", "ls -la" → "ls"). It is empty for a
// command holding a shell operator, which no prefix may allow.
func commandPrefix(cmd string) string {
	if strings.ContainsAny(cmd, shellOperators+"'\"*?=") || !safeWords(cmd) {
		return ""
	}
	words := strings.Fields(cmd)
	if len(words) == 0 {
		return ""
	}
	p := words[0]
	if len(words) > 1 && plainWord(words[1]) {
		p += " " + words[1]
	}
	return p
}

func plainWord(w string) bool {
	for _, r := range w {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return w != "" && w[0] != '-'
}

// approvalMsg asks the person about a call; the answer goes to reply.
type approvalMsg struct {
	req   *loop.ApprovalRequest
	reply chan loop.Decision
	agent string // the sub-agent whose call it is, "" for the chat's own
}

// approver is the chat's [loop.Approver]: it asks the UI through the
// run's message channel and waits for the answer.
type approver struct {
	allow Allower
	send  func(ctx context.Context, msg any) bool
}

func (a *approver) Approve(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
	// An "always" answer never approves what only a person may (the
	// tool's AskPerson: a safety check, typing into a password field).
	if req.Person == "" && a.allow.Allowed(req.Call.Name, req.Call.Arguments.JSON()) {
		return loop.Decision{Verdict: loop.Approve}, nil
	}
	reply := make(chan loop.Decision, 1)
	if !a.send(ctx, approvalMsg{req: req, reply: reply, agent: loop.AgentName(ctx)}) {
		return loop.Decision{}, ctx.Err()
	}
	select {
	case d := <-reply:
		return d, nil
	case <-ctx.Done():
		return loop.Decision{}, ctx.Err()
	}
}

// A preview is what a person sees of a call before approving it: display
// lines, styled by the chat (the untrusted text in them escaped).
type preview struct {
	title   string
	lines   []string
	escaped int
	prefix  string // the command prefix "always" may allow, if any
	// lookAlikes are the words shown that mix Latin letters with
	// look-alikes of another script ([safetext.LookAlikes]).
	lookAlikes []string
}

// look notes the look-alike words of s, at most maxLookAlikes.
func (p *preview) look(s string) {
	if len(p.lookAlikes) < maxLookAlikes {
		p.lookAlikes = append(p.lookAlikes, safetext.LookAlikes(s)...)
		p.lookAlikes = p.lookAlikes[:min(len(p.lookAlikes), maxLookAlikes)]
	}
}

// maxLookAlikes bounds the look-alike words an approval lists.
const maxLookAlikes = 5

// maxPreviewFile bounds the file read to diff a write or an edit against.
const maxPreviewFile = 4 << 20

// describe builds the preview of a call: the command, a diff against the
// current file for write_file and edit_file, and every other argument.
func describe(call *loop.ApprovalRequest, workdir string, st *styles, width int) *preview {
	name := safetext.Escape(call.Call.Name)
	raw := call.Call.Arguments.JSON()
	p := &preview{title: name + " wants to run"}
	opts := &safetext.Options{Width: max(20, width-12), Mark: st.mark}
	text := func(prefix string, style func(...string) string, s string) {
		blk := safetext.Render(s, opts)
		p.escaped += blk.Escaped
		p.look(s)
		for i, l := range blk.Lines {
			pre := prefix
			if i > 0 || l.Continued {
				pre = strings.Repeat(" ", len(prefix))
			}
			p.lines = append(p.lines, style(pre+l.Text))
		}
	}
	plain := func(s ...string) string { return strings.Join(s, "") }
	if call.Person != "" {
		// Why only a person may approve it, as the tool says.
		text("⚠ ", st.warn.Render, call.Person)
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		text("arguments: ", plain, string(raw))
		return p
	}
	shown := map[string]bool{}
	switch call.Call.Name {
	case "run_command":
		var a struct {
			Command string `json:"command"`
		}
		json.Unmarshal(raw, &a)
		text("$ ", st.command.Render, a.Command)
		p.prefix = commandPrefix(a.Command)
		shown["command"] = true
	case "run_code":
		// The program, every line of it numbered, as hrns run shows it.
		var a struct {
			Code string `json:"code"`
		}
		json.Unmarshal(raw, &a)
		n := p.program(a.Code, st, opts, width)
		p.title = fmt.Sprintf("%s wants to run a program of %s", name, plural(n, "line"))
		shown["code"] = true
	case "write_file", "edit_file":
		var a struct {
			Path       string `json:"path"`
			Content    string `json:"content"`
			OldString  string `json:"old_string"`
			NewString  string `json:"new_string"`
			ReplaceAll bool   `json:"replace_all"`
		}
		json.Unmarshal(raw, &a)
		old, exists, err := readCurrent(workdir, a.Path)
		var after string
		var note string
		if call.Call.Name == "write_file" {
			after = a.Content
			switch {
			case err != nil:
				note = "cannot read the current file (" + err.Error() + "): showing the new content"
				old = ""
			case exists:
				p.title = name + " wants to overwrite " + safetext.Escape(a.Path)
			default:
				p.title = name + " wants to create " + safetext.Escape(a.Path)
			}
			shown["content"] = true
		} else {
			p.title = name + " wants to edit " + safetext.Escape(a.Path)
			n := strings.Count(old, a.OldString)
			switch {
			case err != nil || !exists:
				note = "the file cannot be read: showing the replacement alone"
				old, after = a.OldString, a.NewString
			case a.OldString == "" || n == 0:
				note = "old_string is not in the file: the edit will fail; showing the replacement alone"
				old, after = a.OldString, a.NewString
			case a.ReplaceAll:
				after = strings.ReplaceAll(old, a.OldString, a.NewString)
				note = fmt.Sprintf("every occurrence (%d)", n)
			default:
				after = strings.Replace(old, a.OldString, a.NewString, 1)
				if n > 1 {
					note = fmt.Sprintf("old_string occurs %d times: the edit will fail unless replace_all is set", n)
				}
			}
			shown["old_string"], shown["new_string"], shown["replace_all"] = true, true, true
		}
		shown["path"] = true
		if note != "" {
			p.lines = append(p.lines, st.dim.Render("("+safetext.Escape(note)+")"))
		}
		p.diff(old, after, st, text)
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		if !shown[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		text(k+": ", plain, string(args[k]))
	}
	return p
}

// program adds code as numbered lines ([callview.Program]), the numbers
// dimmed, fitted to the screen's width, and returns how many lines the
// program has.
func (p *preview) program(code string, st *styles, opts *safetext.Options, width int) int {
	n := strings.Count(strings.TrimSuffix(code, "\n"), "\n") + 1
	o := *opts
	o.Width = max(20, width-4-len(strconv.Itoa(n))-3)
	lines, escaped := callview.Program(code, &o)
	p.escaped += escaped
	p.look(code)
	for _, l := range lines {
		p.lines = append(p.lines, st.dim.Render(l.Gutter)+l.Text)
	}
	return n
}

// diff adds a coloured diff of old to new, with line numbers and three
// lines of context.
func (p *preview) diff(old, new string, st *styles, text func(string, func(...string) string, string)) {
	lines := diffText(old, new, 3)
	if len(lines) == 0 {
		p.lines = append(p.lines, st.dim.Render("(no change)"))
		return
	}
	num := func(n int) string {
		if n == 0 {
			return "    "
		}
		return fmt.Sprintf("%4d", n)
	}
	for _, l := range lines {
		switch l.Op {
		case '~':
			p.lines = append(p.lines, st.dim.Render("   ⋮      ⋮"))
		case '-':
			text(num(l.Old)+" "+num(0)+" - ", st.del.Render, l.Text)
		case '+':
			text(num(0)+" "+num(l.New)+" + ", st.add.Render, l.Text)
		default:
			text(num(l.Old)+" "+num(l.New)+"   ", st.dim.Render, l.Text)
		}
	}
	if new != "" && !strings.HasSuffix(new, "\n") {
		p.lines = append(p.lines, st.dim.Render("(no newline at the end)"))
	}
}

// readCurrent reads path under workdir, as the file tools would see it.
func readCurrent(workdir, path string) (string, bool, error) {
	if workdir == "" || path == "" {
		return "", false, nil
	}
	root, err := os.OpenRoot(workdir)
	if err != nil {
		return "", false, err
	}
	defer root.Close()
	f, err := root.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if fi.IsDir() {
		return "", true, errors.New("it is a directory")
	}
	if fi.Size() > maxPreviewFile {
		return "", true, fmt.Errorf("it has %d bytes", fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPreviewFile))
	if err != nil {
		return "", true, err
	}
	return string(b), true, nil
}
