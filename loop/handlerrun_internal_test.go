package loop

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// TestHandlerAnswerAndContextEndReadyTogether: when the handler's answer
// and the end of its context are both there by the time the call is
// waited for (the run's goroutine was busy, or the machine loaded), the
// outcome is decided by which came first, not by the select, which picks
// at random among ready cases. An answer given after the context ended,
// whatever it is (a handler that stops early and says so), is the call
// interrupted or timed out; an answer given before it is the call's.
func TestHandlerAnswerAndContextEndReadyTogether(t *testing.T) {
	answers := map[string]func(context.Context) (*Output, error){
		"output":        func(context.Context) (*Output, error) { return TextOutput("stopped early"), nil },
		"error output":  func(context.Context) (*Output, error) { return ErrorOutput("killed"), nil },
		"error":         func(context.Context) (*Output, error) { return nil, errors.New("signal: killed") },
		"context error": func(ctx context.Context) (*Output, error) { return nil, ctx.Err() },
	}
	ends := map[string]struct {
		kind ToolErrorKind
		end  func(stop context.CancelFunc) // ends the call's context
	}{
		"run stopped": {ToolInterrupted, func(stop context.CancelFunc) { stop() }},
		"timed out":   {ToolTimedOut, func(context.CancelFunc) { time.Sleep(2 * time.Second) }},
	}
	// waitWith waits for h with its answer and its context's end both
	// there, the same way runOne does (its own select) or runBatch
	// (wait).
	waits := map[string]func(h *handlerRun) (*Output, error){
		"wait": (*handlerRun).wait,
		"runOne's select": func(h *handlerRun) (*Output, error) {
			defer h.cancel()
			select {
			case a := <-h.done:
				return h.answered(a)
			case <-h.ctx.Done():
				return h.ended()
			}
		},
	}
	const tries = 64 // a select with two ready cases picks each half the time
	for answerName, answer := range answers {
		for endName, end := range ends {
			for waitName, wait := range waits {
				t.Run(answerName+"/"+endName+"/"+waitName, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						for i := range tries {
							late := i%2 == 0 // else: answers, then its context ends
							answered := make(chan struct{})
							handler := func(ctx context.Context, _ *Call) (*Output, error) {
								defer close(answered)
								if late {
									<-ctx.Done()
								}
								return answer(ctx)
							}
							x, p := handlerRunSetup(t, handler)
							ctx, stop := context.WithCancel(t.Context())
							h := x.startHandler(ctx, p)
							if !late {
								<-answered
								synctest.Wait() // its answer is sent
							}
							end.end(stop)
							<-answered
							synctest.Wait()
							if h.ctx.Err() == nil {
								t.Fatal("the call's context did not end")
							}
							out, err := wait(h)
							stop()
							var te *ToolError
							switch {
							case late && (!errors.As(err, &te) || te.Kind != end.kind):
								t.Fatalf("try %d: answered after its context ended: (%v, %v), want a %s error", i, out, err, end.kind)
							case !late && errors.As(err, &te) && (te.Kind == ToolInterrupted || te.Kind == ToolTimedOut):
								t.Fatalf("try %d: answered before its context ended: %v, want its answer", i, err)
							}
						}
					})
				})
			}
		}
	}
}

// handlerRunSetup returns an executor and a resolved call of a tool with
// handler and a timeout of one second.
func handlerRunSetup(t *testing.T, handler Handler) (*executor, *execCall) {
	t.Helper()
	ts := MustToolset(&ToolDef{Name: "t", Handler: handler, Timeout: time.Second})
	o := &Options{}
	o.setDefaults()
	x := &executor{tools: ts, opts: o, emit: func(Chunk) bool { return true }, consumerGone: func() bool { return false }}
	call := llm.ToolCall{ID: "c1", Name: "t", Arguments: llm.Arguments(`{}`)}
	p := &execCall{call: call, state: SuspendedCall{Call: call}}
	x.resolveCall(p)
	if p.failure != nil {
		t.Fatal(p.failure)
	}
	return x, p
}
