package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/hrns-dev/hrns/loop"
)

// termApprover asks the person at the terminal about calls that need
// approval. Without a terminal it refuses them, so a script never hangs
// waiting for an answer nobody will type.
type termApprover struct {
	stdio *IO
	yes   bool

	mu     sync.Mutex
	always map[string]bool
	lines  chan string // lines read from stdin by one reader goroutine
}

func newTermApprover(stdio *IO, yes bool) *termApprover {
	return &termApprover{stdio: stdio, yes: yes, always: map[string]bool{}}
}

func (a *termApprover) Approve(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
	if a.yes {
		return loop.Decision{Verdict: loop.Approve}, nil
	}
	a.mu.Lock()
	always := a.always[req.Call.Name]
	a.mu.Unlock()
	if always {
		return loop.Decision{Verdict: loop.Approve}, nil
	}
	if !a.stdio.interactive() {
		fmt.Fprintf(a.stdio.Err, "  ✗ %s needs approval and there is no terminal to ask: rerun with --yes to allow it\n", req.Call.Name)
		return loop.Decision{Verdict: loop.Reject, Reason: "it needs approval and hrns is not running in a terminal where a person can approve it " +
			"(the user can rerun with --yes to allow such calls)"}, nil
	}
	w := a.stdio.Err
	fmt.Fprintf(w, "\n%s wants to run:\n%s\n", req.Call.Name, describeCall(req.Call.Name, json.RawMessage(req.Call.Arguments)))
	for {
		fmt.Fprintf(w, "Allow? [y]es, [n]o, [a]lways allow %s: ", req.Call.Name)
		line, err := a.readLine(ctx)
		if err != nil {
			fmt.Fprintln(w)
			return loop.Decision{}, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return loop.Decision{Verdict: loop.Approve}, nil
		case "a", "always":
			a.mu.Lock()
			a.always[req.Call.Name] = true
			a.mu.Unlock()
			return loop.Decision{Verdict: loop.Approve}, nil
		case "n", "no":
			fmt.Fprint(w, "Tell the model why (optional): ")
			reason, _ := a.readLine(ctx)
			reason = strings.TrimSpace(reason)
			if reason == "" {
				reason = "the user said no"
			}
			return loop.Decision{Verdict: loop.Reject, Reason: reason}, nil
		}
	}
}

// readLine reads a line from stdin, or returns when ctx is done. One
// goroutine reads stdin for the whole run, so an abandoned prompt does not
// leave a reader that steals the next answer.
func (a *termApprover) readLine(ctx context.Context) (string, error) {
	a.mu.Lock()
	if a.lines == nil {
		a.lines = make(chan string)
		go func(r io.Reader, lines chan<- string) {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}(a.stdio.In, a.lines)
	}
	lines := a.lines
	a.mu.Unlock()
	select {
	case line, ok := <-lines:
		if !ok {
			return "", io.EOF
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// describeCall shows what a call will do: the command, the edit as a diff,
// the file to write.
func describeCall(name string, raw json.RawMessage) string {
	var args map[string]any
	json.Unmarshal(raw, &args)
	str := func(k string) string { s, _ := args[k].(string); return s }
	var b strings.Builder
	switch name {
	case "run_command":
		fmt.Fprintf(&b, "  $ %s\n", str("command"))
	case "edit_file":
		fmt.Fprintf(&b, "  --- %s\n  +++ %s\n", str("path"), str("path"))
		for _, l := range strings.Split(str("old_string"), "\n") {
			fmt.Fprintf(&b, "  -%s\n", l)
		}
		for _, l := range strings.Split(str("new_string"), "\n") {
			fmt.Fprintf(&b, "  +%s\n", l)
		}
		if args["replace_all"] == true {
			b.WriteString("  (every occurrence)\n")
		}
	case "write_file":
		content := str("content")
		fmt.Fprintf(&b, "  write %s (%d bytes)\n", str("path"), len(content))
		lines := strings.Split(content, "\n")
		for i, l := range lines {
			if i == 12 {
				fmt.Fprintf(&b, "  … %d more lines\n", len(lines)-12)
				break
			}
			fmt.Fprintf(&b, "  +%s\n", l)
		}
	default:
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := json.Marshal(args[k])
			fmt.Fprintf(&b, "  %s: %s\n", k, clip(string(v), 300))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
