package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

func TestInvoke(t *testing.T) {
	type args struct {
		N int `json:"n" default:"2"`
	}
	double := loop.NewTool("double", "Doubles.", func(_ context.Context, a args) (int, error) { return 2 * a.N, nil })
	fails := loop.NewTool("fails", "Fails.", func(context.Context, struct{}) (string, error) { return "", errors.New("nope") })
	soft := &loop.ToolDef{Name: "soft", Handler: func(context.Context, *loop.Call) (*loop.Output, error) { return loop.ErrorOutput("not found"), nil }}
	guarded, _ := guarded()
	client := loop.NewClientTool("remote", "", nil)
	ts := loop.MustToolset(double, fails, soft, guarded, client)
	approve := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	tests := []struct {
		name     string
		tool     string
		args     string
		opts     *loop.InvokeOptions
		want     string // output text
		isError  bool
		kind     loop.ToolErrorKind
		sentinel error
	}{
		{name: "defaults applied", tool: "double", args: `{}`, want: "4"},
		{name: "valid", tool: "double", args: `{"n":21}`, want: "42"},
		{name: "bad args", tool: "double", args: `{"n":"x"}`, kind: loop.ToolBadArgs},
		{name: "unknown", tool: "triple", args: `{}`, kind: loop.ToolUnknown},
		{name: "handler error", tool: "fails", args: `{}`, kind: loop.ToolFailed},
		{name: "tool's own error output", tool: "soft", args: `{}`, want: "not found", isError: true},
		{name: "approval refused without approver", tool: "delete_file", args: `{"path":"x"}`, kind: loop.ToolRefused},
		{name: "approved", tool: "delete_file", args: `{"path":"x"}`, opts: &loop.InvokeOptions{Approver: approve}, want: "deleted x"},
		{name: "client tool pends", tool: "remote", args: `{}`, sentinel: loop.ErrPending},
		{name: "deferred approval", tool: "delete_file", args: `{"path":"x"}`, opts: &loop.InvokeOptions{Approver: loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{Verdict: loop.Defer}, nil
		})}, sentinel: loop.ErrPendingApproval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ts.Invoke(t.Context(), llm.ToolCall{Name: tt.tool, Arguments: []byte(tt.args)}, tt.opts)
			switch {
			case tt.kind != "":
				te, ok := errors.AsType[*loop.ToolError](err)
				if !ok || te.Kind != tt.kind || te.Msg == "" {
					t.Fatalf("err = %v, want a %s ToolError", err, tt.kind)
				}
			case tt.sentinel != nil:
				if !errors.Is(err, tt.sentinel) {
					t.Fatalf("err = %v, want %v", err, tt.sentinel)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if got := (&llm.ToolResult{Content: out.Content}).Text(); got != tt.want || out.IsError != tt.isError {
					t.Errorf("output %q (error %v), want %q (%v)", got, out.IsError, tt.want, tt.isError)
				}
			}
		})
	}
}

func TestInvokeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &loop.ToolDef{Name: "slow", Handler: func(ctx context.Context, _ *loop.Call) (*loop.Output, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		_, err := loop.MustToolset(slow).Invoke(t.Context(), llm.ToolCall{Name: "slow"}, &loop.InvokeOptions{Timeout: 3 * time.Second})
		te, ok := errors.AsType[*loop.ToolError](err)
		if !ok || te.Kind != loop.ToolTimedOut || !strings.Contains(te.Msg, "3s") {
			t.Fatalf("err = %v", err)
		}
	})
}
