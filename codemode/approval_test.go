package codemode_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/codemode"
	"github.com/hrns-dev/hrns/loop"
)

// TestProgramApproval: with RequireApproval, a program that passed its
// checks runs only once approved; the approver sees its source; a
// rejection, a failure, a deferral, no approver, or no answer by the
// deadline refuses it and nothing runs.
func TestProgramApproval(t *testing.T) {
	const code = "result = add(a=1, b=2)"
	tests := []struct {
		name     string
		approver loop.Approver
		ran      bool
		msg      string
	}{{
		name:     "approved",
		approver: verdict(loop.Decision{Verdict: loop.Approve}, nil),
		ran:      true,
	}, {
		name:     "rejected",
		approver: verdict(loop.Decision{Verdict: loop.Reject, Reason: "no arithmetic on Sundays"}, nil),
		msg:      `the program was not run: the call to tool "run_code" was rejected: no arithmetic on Sundays`,
	}, {
		name:     "approver error",
		approver: verdict(loop.Decision{}, errors.New("approval service down")),
		msg:      `the program was not run: approval for tool "run_code" failed (approval service down); the call was not run`,
	}, {
		name:     "deferred",
		approver: verdict(loop.Decision{Verdict: loop.Defer}, nil),
		msg:      `the program was not run: the call to tool "run_code" was rejected: approval was deferred, and a program cannot wait for a later decision`,
	}, {
		name:     "approver panics",
		approver: loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) { panic("oops") }),
		msg:      `the program was not run: approval for tool "run_code" failed (approver panicked: oops); the call was not run`,
	}, {
		name: "no approver",
		msg:  `the program was not run: tool "run_code" requires approval and no approver is configured; the call was not run`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			add := count(addTool())
			var seen []string
			approver := tt.approver
			if approver != nil {
				approver = loop.ApproverFunc(func(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
					src, _ := codemode.SourceOf(req)
					seen = append(seen, req.Call.Name+": "+src)
					return tt.approver.Approve(ctx, req)
				})
			}
			r := newRunner(t, &codemode.Options{RequireApproval: true, Approver: approver}, add.def)
			res, err := r.Run(t.Context(), code)
			if tt.ran {
				if err != nil || res.Text != `result: {"sum":3}` {
					t.Fatalf("Run = %+v, %v", res, err)
				}
			} else {
				e := asError(t, err)
				if e.Kind != codemode.KindRefused || e.Error() != tt.msg {
					t.Errorf("error = %q (%s), want %q", e, e.Kind, tt.msg)
				}
			}
			if want := map[bool]int64{true: 1}[tt.ran]; add.calls.Load() != want {
				t.Errorf("add ran %d times, want %d", add.calls.Load(), want)
			}
			if approver != nil {
				if diff := cmp.Diff([]string{"run_code: " + code}, seen); diff != "" {
					t.Errorf("approver saw (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestApprovalNotAskedForRefusedPrograms: a program that does not pass its
// checks is refused before the approver is bothered.
func TestApprovalNotAskedForRefusedPrograms(t *testing.T) {
	asked := 0
	r := newRunner(t, &codemode.Options{RequireApproval: true, Approver: loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		asked++
		return loop.Decision{Verdict: loop.Approve}, nil
	})}, addTool())
	_, err := r.Run(t.Context(), "add(a=1)")
	if e := asError(t, err); e.Kind != codemode.KindCheck || asked != 0 {
		t.Errorf("kind %s, approver asked %d times; want %s and 0", e.Kind, asked, codemode.KindCheck)
	}
}

// TestApprovalDeadline: an approver that never answers, not even when its
// context ends, is refused at the deadline and the program never runs.
func TestApprovalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		deadlines := make(chan time.Time, 1)
		hung := loop.ApproverFunc(func(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
			deadlines <- req.Deadline
			<-release // ignores ctx: a broken approver
			return loop.Decision{Verdict: loop.Approve}, nil
		})
		add := count(addTool())
		r := newRunner(t, &codemode.Options{RequireApproval: true, Approver: hung, ApprovalTimeout: 90 * time.Second}, add.def)
		start := time.Now()
		_, err := r.Run(t.Context(), "result = add(a=1, b=2)")
		e := asError(t, err)
		want := `the program was not run: approval for tool "run_code" timed out after 1m30s; the call was not run`
		if e.Kind != codemode.KindRefused || e.Error() != want {
			t.Errorf("error = %q (%s), want %q", e, e.Kind, want)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Error("error does not wrap context.DeadlineExceeded")
		}
		if got := time.Since(start); got != 90*time.Second {
			t.Errorf("refused after %v, want 1m30s (fake time)", got)
		}
		if deadline := <-deadlines; !deadline.Equal(start.Add(90 * time.Second)) {
			t.Errorf("request deadline = %v, want %v", deadline, start.Add(90*time.Second))
		}
		if add.calls.Load() != 0 {
			t.Error("the program ran")
		}
	})
}

// TestCapabilityApproval: a capability marked RequiresApproval asks the
// approver on every call, as the loop does for model calls; a refusal
// stops the program with a capability error.
func TestCapabilityApproval(t *testing.T) {
	remove := count(loop.NewTool("remove", "Removes an item.", func(_ context.Context, in struct {
		Name string `json:"name"`
	}) (string, error) {
		return "removed " + in.Name, nil
	}))
	remove.def.RequiresApproval = true
	var asked []string
	approver := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		asked = append(asked, string(req.Call.Arguments))
		if string(req.Call.Arguments) == `{"name":"cherry"}` {
			return loop.Decision{Verdict: loop.Reject, Reason: "cherries stay"}, nil
		}
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	r := newRunner(t, &codemode.Options{Approver: approver}, remove.def)
	_, err := r.Run(t.Context(), "for name in ['apple', 'cherry', 'banana']:\n    print(remove(name=name))\n")
	e := asError(t, err)
	want := "the program failed at 2:17: the call to tool \"remove\" was rejected: cherries stay\nOutput before it stopped:\nremoved apple"
	if e.Kind != codemode.KindCapability || e.Error() != want {
		t.Errorf("error = %q (%s), want %q", e, e.Kind, want)
	}
	if diff := cmp.Diff([]string{`{"name":"apple"}`, `{"name":"cherry"}`}, asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	if remove.calls.Load() != 1 {
		t.Errorf("remove ran %d times, want 1", remove.calls.Load())
	}
}

func verdict(d loop.Decision, err error) loop.Approver {
	return loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) { return d, err })
}

// TestCapabilityApprovalVerdicts: a program cannot be suspended, so an
// approver's Defer or Cancel on a capability call is a rejection of that
// call, and the agent's run goes on.
func TestCapabilityApprovalVerdicts(t *testing.T) {
	tests := []struct {
		verdict loop.Verdict
		msg     string
	}{
		{loop.Defer, `the program failed at 1:7: the call to tool "remove" was rejected: approval was deferred, and a program cannot wait for a later decision`},
		{loop.Cancel, `the program failed at 1:7: the call to tool "remove" was rejected: not now`},
	}
	for _, tt := range tests {
		remove := count(funcTool("remove", func(context.Context) (string, error) { return "removed", nil }))
		remove.def.RequiresApproval = true
		r := newRunner(t, &codemode.Options{Approver: verdict(loop.Decision{Verdict: tt.verdict, Reason: "not now"}, nil)}, remove.def)
		_, err := r.Run(t.Context(), "remove()")
		if e := asError(t, err); e.Kind != codemode.KindCapability || e.Error() != tt.msg {
			t.Errorf("verdict %v: error = %q (%s), want %q", tt.verdict, e, e.Kind, tt.msg)
		}
		if remove.calls.Load() != 0 {
			t.Errorf("verdict %v: remove ran", tt.verdict)
		}
	}
}
