package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

func approvalReq(name, args string) *loop.ApprovalRequest {
	return &loop.ApprovalRequest{Call: llm.ToolCall{ID: "c", Name: name, Arguments: llm.Arguments(args)}}
}

func TestTerminalApprover(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		calls     int // how many times the same tool asks
		want      []loop.Verdict
		reason    string
		prompted  int
		showsText string
	}{
		{"yes", "y\n", 1, []loop.Verdict{loop.Approve}, "", 1, "$ rm -rf build"},
		{"no with a reason", "n\nuse make clean\n", 1, []loop.Verdict{loop.Reject}, "use make clean", 1, ""},
		{"no without a reason", "no\n\n", 1, []loop.Verdict{loop.Reject}, "the user said no", 1, ""},
		{"always asks once", "a\n", 3, []loop.Verdict{loop.Approve, loop.Approve, loop.Approve}, "", 1, ""},
		{"asks again on nonsense", "maybe\ny\n", 1, []loop.Verdict{loop.Approve}, "", 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errOut bytes.Buffer
			stdio := &IO{In: strings.NewReader(tt.input), Err: &errOut, Interactive: func() bool { return true }}
			a := newTermApprover(stdio, false)
			for i := range tt.calls {
				d, err := a.Approve(t.Context(), approvalReq("run_command", `{"command":"rm -rf build"}`))
				if err != nil {
					t.Fatal(err)
				}
				if d.Verdict != tt.want[i] {
					t.Errorf("call %d: verdict %v, want %v", i, d.Verdict, tt.want[i])
				}
				if tt.reason != "" && d.Reason != tt.reason {
					t.Errorf("reason %q, want %q", d.Reason, tt.reason)
				}
			}
			if n := strings.Count(errOut.String(), "Allow?"); n != tt.prompted {
				t.Errorf("prompted %d times, want %d:\n%s", n, tt.prompted, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.showsText) {
				t.Errorf("prompt does not show %q:\n%s", tt.showsText, errOut.String())
			}
		})
	}
}

func TestTerminalApproverWithoutTerminal(t *testing.T) {
	var errOut bytes.Buffer
	a := newTermApprover(&IO{In: strings.NewReader("y\n"), Err: &errOut, Interactive: func() bool { return false }}, false)
	d, _ := a.Approve(t.Context(), approvalReq("write_file", `{"path":"a","content":"b"}`))
	if d.Verdict != loop.Reject || !strings.Contains(d.Reason, "--yes") {
		t.Errorf("decision %+v: a script must never be asked", d)
	}
	yes := newTermApprover(&IO{Interactive: func() bool { return false }}, true)
	if d, _ := yes.Approve(t.Context(), approvalReq("write_file", `{}`)); d.Verdict != loop.Approve {
		t.Errorf("--yes: %+v", d)
	}
}

func TestTerminalApproverStopsWithTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r, _ := newPipe(t)
	a := newTermApprover(&IO{In: r, Err: &bytes.Buffer{}, Interactive: func() bool { return true }}, false)
	if _, err := a.Approve(ctx, approvalReq("run_command", `{"command":"ls"}`)); err == nil {
		t.Fatal("an approval that nobody answers must end with the context")
	}
}

func TestDescribeEdit(t *testing.T) {
	got := describeCall("edit_file", json.RawMessage(`{"path":"main.go","old_string":"a := 1","new_string":"a := 2\nb := 3"}`))
	want := "  --- main.go\n  +++ main.go\n  -a := 1\n  +a := 2\n  +b := 3"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
