package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// The parts of the model-based test (model_test.go) that stand for the
// world around the runtime: a scripted model whose every reply is a
// function of the request it gets (so that a request sent again after a
// crash gets the same reply), server tools that record when they run,
// and a store that fails the writes it is told to.
//
// Each caller message is "s<session>.m<n> <directive>": the tag names it
// (it reaches the model exactly once), the directive says what the model
// does when it reads it (see mtReply).

// mtTag matches a caller message's tag and directive.
// The session's part, "q<sequence>s<session>", is unique in the test
// process (a session a sequence left behind may run in a later one); a
// child session's adds "c<tick>" (and "x<n>" when its parent's step
// started more than one).
var mtTag = regexp.MustCompile(`^(q\d+s\d+(?:c\d+(?:x\d)?)?\.m\d+) (\S+)$`)

// mtClock orders what happens in a test: model requests, tool runs and
// the caller's actions each take a tick, so that "after it was accepted"
// is a comparison of ticks.
type mtClock struct{ n atomic.Int64 }

func (c *mtClock) tick() int64 { return c.n.Add(1) }

// mtRequest is what the model saw of one request.
type mtRequest struct {
	start int64    // tick at its start
	key   string   // the session ("s3"), from its tags
	tags  []string // the tags of the caller messages, in order
	tools int      // tools offered (declared but not callable: none)
	// results are the tool results it carries, by call id: true for an
	// error.
	results map[string]bool
	// images are the images of the tool results it carries, by call id
	// (see mtImageIDs).
	images map[string][]int64
	// answered is the tick at which the model finished answering without
	// calls; 0 if it made calls, failed, or has not finished.
	answered int64
	// cut is the tick at which the request was cut before its reply
	// ended (its context ended: a stop, a lost lease, a cancel); 0 if it
	// was not.
	cut int64
}

// mtRun is one run of a server tool.
type mtRun struct {
	session string // the session id
	call    string
	tool    string
	start   int64 // tick at its start
	end     int64 // tick at its end; 0 while it runs
	req     int64 // tick of the request that made the call
}

// mtWorld is the model, the tools and their records, shared by the
// managers of one test sequence.
type mtWorld struct {
	clock mtClock

	mu       sync.Mutex
	requests []*mtRequest
	runs     []mtRun
	// gates hold the slow steps: a model request (or a slow tool) for a
	// tag whose gate is not open blocks, and says so on blocked.
	open    map[string]bool
	blocked chan string
	gate    chan struct{} // closed and replaced to wake the blocked
}

func newWorld() *mtWorld {
	return &mtWorld{open: map[string]bool{}, blocked: make(chan string, 64), gate: make(chan struct{})}
}

// release opens the gate of tag (every gate for "*"): its slow step goes
// on, and no later request for it blocks.
func (w *mtWorld) release(tag string) {
	w.mu.Lock()
	w.open[tag] = true
	close(w.gate)
	w.gate = make(chan struct{})
	w.mu.Unlock()
}

// hold blocks until tag's gate opens or ctx ends (ignored when obey is
// false: a tool that does not stop when asked), saying it blocks.
func (w *mtWorld) hold(ctx context.Context, tag string, obey bool) error {
	for {
		w.mu.Lock()
		open, gate := w.open[tag] || w.open["*"], w.gate
		w.mu.Unlock()
		if open {
			return nil
		}
		select {
		case w.blocked <- tag:
		default:
		}
		done := ctx.Done()
		if !obey {
			done = nil
		}
		select {
		case <-gate:
		case <-done:
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("modeltest: a gate was never opened")
		}
	}
}

// Stream implements [llm.Model]: it records the request and answers as
// mtReply says.
func (w *mtWorld) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	r := &mtRequest{start: w.clock.tick(), tools: len(req.Tools), results: map[string]bool{}, images: map[string][]int64{}}
	if req.ToolChoice.Mode == llm.ToolChoiceNone {
		r.tools = 0 // the loop's final request
	}
	last := -1 // the last caller message
	for i, m := range req.Messages {
		for _, p := range m.Parts {
			if p.Kind == llm.PartToolResult && p.ToolResult != nil {
				r.results[p.ToolResult.CallID] = p.ToolResult.IsError
				r.images[p.ToolResult.CallID] = append(r.images[p.ToolResult.CallID], mtImageIDs(p.ToolResult)...)
			}
		}
		if m.Role != llm.RoleUser {
			continue
		}
		if g := mtTag.FindStringSubmatch(strings.TrimSpace(m.Text())); g != nil {
			r.tags = append(r.tags, g[1])
			r.key = g[1][:strings.IndexByte(g[1], '.')]
			last = i
		}
	}
	w.mu.Lock()
	w.requests = append(w.requests, r)
	w.mu.Unlock()
	return func(yield func(llm.Chunk, error) bool) {
		reply, slow := w.reply(req, r, last)
		cut := func() {
			w.mu.Lock()
			r.cut = w.clock.tick()
			w.mu.Unlock()
		}
		if slow != "" {
			if err := w.hold(ctx, slow, true); err != nil {
				cut()
				yield(llm.Chunk{}, err)
				return
			}
		}
		for c, err := range llmtest.NewModel(reply).Stream(ctx, req) {
			if c.Kind == llm.ChunkDone && len(reply.ToolCalls) == 0 {
				w.mu.Lock()
				r.answered = w.clock.tick()
				w.mu.Unlock()
			}
			if !yield(c, err) {
				if c.Kind != llm.ChunkDone {
					cut()
				}
				return
			}
		}
	}
}

// reply is what the model does with req: it acts on the directive of
// the last caller message unless it acted on it already (an assistant
// message follows it), and answers otherwise; without tools to call (a
// final request) it answers.
// It returns the tag whose gate the reply waits for first, if any.
//
// The directives: answer; client and client2 (calls of the caller's
// tool); server (a server tool); slowtool and stuck (a server tool that
// blocks on the tag's gate, the second deaf to cancellation); deny (a
// call the policy refuses); approve (a call that needs approval);
// computer and computer2 (calls of the user desktop's computer tool);
// badjson (an answer the answer_format rejects, then a good one);
// badslow (the same, the second request blocking); delegate,
// delegate-fail, delegate-panic and delegate-approve (a child session
// whose model answers, fails, panics or waits for a decision);
// delegate2 (two children that wait for a decision); mute (a client call,
// and nothing when asked for a final answer); fail (an error that is not
// retried); panic (the model panics). "slow-" before one makes the
// request block on the tag's gate first.
func (w *mtWorld) reply(req *llm.Request, r *mtRequest, last int) (llmtest.Reply, string) {
	answer := llmtest.Text(`{"ok":true}`)
	if last < 0 {
		return answer, ""
	}
	acted := false
	for _, m := range req.Messages[last+1:] {
		acted = acted || m.Role == llm.RoleAssistant
	}
	g := mtTag.FindStringSubmatch(strings.TrimSpace(req.Messages[last].Text()))
	tag, directive := g[1], g[2]
	slow := ""
	if rest, ok := strings.CutPrefix(directive, "slow-"); ok {
		directive = rest
		if !acted {
			slow = tag
		}
	}
	if directive == "badslow" && acted {
		slow = tag
	}
	switch {
	case r.tools == 0 && directive == "mute":
		return llmtest.Text(""), slow
	case r.tools == 0 || acted:
		return answer, slow
	}
	call := func(n int, name string) llm.ToolCall {
		args, _ := json.Marshal(map[string]any{"r": r.start, "tag": tag})
		return llm.ToolCall{ID: fmt.Sprintf("%s.r%d.%d", tag, r.start, n), Name: name, Arguments: llm.Arguments(args)}
	}
	switch directive {
	case "answer":
		return answer, slow
	case "client", "mute":
		return llmtest.Calls(call(0, "ask_client")), slow
	case "client2":
		return llmtest.Calls(call(0, "ask_client"), call(1, "ask_client")), slow
	case "server":
		return llmtest.Calls(call(0, "work")), slow
	case "computer", "computer2": // the user's desktop (model_desktop_test.go)
		calls := []llm.ToolCall{mtScreenshot(call(0, session.ComputerTool))}
		if directive == "computer2" {
			calls = append(calls, mtScreenshot(call(1, session.ComputerTool)))
		}
		return llmtest.Calls(calls...), slow
	case "slowtool":
		return llmtest.Calls(call(0, "work_slow")), slow
	case "stuck":
		return llmtest.Calls(call(0, "work_stuck")), slow
	case "deny":
		return llmtest.Calls(call(0, "forbidden")), slow
	case "approve":
		return llmtest.Calls(call(0, "guarded")), slow
	case "delegate", "delegate-fail", "delegate-panic", "delegate-approve":
		// A child session whose model answers, fails, panics, or calls
		// a tool that needs approval (the child waits, and its parent
		// with it).
		child := "answer"
		if _, how, ok := strings.Cut(directive, "-"); ok {
			child = how
		}
		c := call(0, "delegate")
		args, _ := json.Marshal(map[string]any{"agent": "helper", "task": fmt.Sprintf("%sc%d.m0 %s", tag[:strings.IndexByte(tag, '.')], r.start, child)})
		c.Arguments = llm.Arguments(args)
		return llmtest.Calls(c), slow
	case "delegate2":
		// Two children in one step, each waiting for a decision.
		var calls []llm.ToolCall
		for n := range 2 {
			c := call(n, "delegate")
			args, _ := json.Marshal(map[string]any{"agent": "helper", "task": fmt.Sprintf("%sc%dx%d.m0 approve", tag[:strings.IndexByte(tag, '.')], r.start, n)})
			c.Arguments = llm.Arguments(args)
			calls = append(calls, c)
		}
		return llmtest.Calls(calls...), slow
	case "badjson", "badslow":
		return llmtest.Text("not json"), slow
	case "fail":
		return llmtest.Fail(errors.New("modeltest: the model refuses (not retryable)")), slow
	case "panic":
		return llmtest.Reply{Func: func(*llm.Request) llmtest.Reply { panic("modeltest: the model panics") }}, slow
	}
	panic("modeltest: unknown directive " + directive)
}

// requestsOf returns the requests of the session key, in order.
func (w *mtWorld) requestsOf(key string) []*mtRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*mtRequest
	for _, r := range w.requests {
		if r.key == key {
			out = append(out, r)
		}
	}
	return out
}

// runsOf returns the tool runs of the session id.
func (w *mtWorld) runsOf(id string) []mtRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []mtRun
	for _, r := range w.runs {
		if r.session == id {
			out = append(out, r)
		}
	}
	return out
}

// tools returns the server tools: work runs at once, work_slow blocks
// on its tag's gate until it opens or the call's context ends,
// work_stuck too but it does not stop when its context ends (a tool that
// ignores cancellation), forbidden is refused by the deny rule of
// mtPermissions and guarded requires approval. Each records its runs.
func (w *mtWorld) tools() *loop.Toolset {
	schema := json.RawMessage(`{"type":"object","properties":{"r":{"type":"integer"},"tag":{"type":"string"}}}`)
	tool := func(name string, approval bool) *loop.ToolDef {
		return &loop.ToolDef{Name: name, Description: name, InputSchema: schema, RequiresApproval: approval,
			Handler: func(ctx context.Context, c *loop.Call) (*loop.Output, error) {
				id, _ := session.IDFromContext(ctx)
				req, _ := strconv.ParseInt(fmt.Sprint(c.Args["r"]), 10, 64)
				w.mu.Lock()
				w.runs = append(w.runs, mtRun{session: id, call: c.ID, tool: name, start: w.clock.tick(), req: req})
				i := len(w.runs) - 1
				w.mu.Unlock()
				defer func() {
					w.mu.Lock()
					w.runs[i].end = w.clock.tick()
					w.mu.Unlock()
				}()
				switch name {
				case "work_stuck", "work_slow":
					if err := w.hold(ctx, fmt.Sprint(c.Args["tag"]), name == "work_slow"); err != nil {
						return nil, err
					}
				}
				return loop.TextOutput("worked " + c.ID), nil
			}}
	}
	return loop.MustToolset(tool("work", false), tool("work_slow", false), tool("work_stuck", false), tool("forbidden", false), tool("guarded", true))
}

// mtPermissions refuses every call of forbidden.
var mtPermissions = &loop.Permissions{Deny: []loop.Rule{{Tool: "forbidden"}}}

// errInjected is the error of a write the failing store was told to fail.
var errInjected = errors.New("modeltest: injected store write failure")

// failingStore fails session updates made by a worker (under a lease),
// without writing, as a store that lost its connection does: after skip
// more such updates pass, the next fails.
type failingStore struct {
	store.Store
	mu     sync.Mutex
	skip   int
	fails  int
	failed int
	// deliveries is how many more deliveries of a child's end fail.
	deliveries int
	// deliveriesFailed counts the deliveries failed so far.
	deliveriesFailed int
	// pause holds a claim or a worker's update once (model_desktop_test.go).
	pause atomic.Pointer[mtPause]
	// claimErrors counts the claims that answered an error: the
	// dispatcher bounds a claim by half a lease TTL (200 ms here), which
	// a loaded machine's database can take; such a claim may have
	// committed all the same, and the dispatcher asks the store what it
	// took (RecoverClaim). recoverErrors counts the calls of
	// RecoverClaim that answered an error (bounded by a quarter of a
	// lease TTL): when they all do, the claim's sessions wait for their
	// leases to lapse, their attempt counted (see check).
	claimErrors, recoverErrors atomic.Int64
}

// failDeliveries makes the next n deliveries of a child's end to its
// parent fail (writes made without a lease that answer a delegate call),
// as a crash or a lost connection at that moment would.
func (s *failingStore) failDeliveries(n int) {
	s.mu.Lock()
	s.deliveries = n
	s.mu.Unlock()
}

// deliveriesDone counts the deliveries failed so far.
func (s *failingStore) deliveriesDone() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deliveriesFailed
}

// isDelivery reports whether a write without a lease answers a delegate
// call: a delivery of a child's end.
func isDelivery(events []store.Event) bool {
	for _, e := range events {
		if e.Type != session.EventAgent {
			continue
		}
		var d session.AgentEventData
		if json.Unmarshal(e.Data, &d) == nil && d.ToolReq != nil && d.ToolReq.ToolName == "delegate" && d.Origin != "hrns" {
			return true
		}
	}
	return false
}

// arm makes the worker's update after the next skip fail, fails times.
func (s *failingStore) arm(skip, fails int) {
	s.mu.Lock()
	s.skip, s.fails = skip, fails
	s.mu.Unlock()
}

// failures counts the updates failed so far.
func (s *failingStore) failures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *failingStore) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if (opts == nil || opts.Lease == "") && isDelivery(events) {
		s.mu.Lock()
		fail := s.deliveries > 0
		if fail {
			s.deliveries--
			s.failed++
			s.deliveriesFailed++
		}
		s.mu.Unlock()
		if fail {
			return errInjected
		}
	}
	if opts != nil && opts.Lease != "" {
		s.mu.Lock()
		fail := false
		switch {
		case s.fails == 0:
		case s.skip > 0:
			s.skip--
		default:
			s.fails--
			s.failed++
			fail = true
		}
		s.mu.Unlock()
		if fail {
			return errInjected
		}
		s.pauseAt("update-before")
		defer s.pauseAt("update-after")
	}
	return s.Store.UpdateSession(ctx, sess, events, opts)
}
