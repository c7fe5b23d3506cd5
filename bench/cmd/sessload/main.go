// Command sessload drives a sessions server (hrns serve) for the driver's
// sessions benchmark, through the Go SDK (package client). Each run does
// one job and prints one JSON line with what it measured:
//
//	sessload warmup    --url U --key K --sessions 20
//	sessload roundtrip --url U --key K --mock M --sessions 40
//	sessload wakeup    --url U --key K --samples 200
//	sessload park      --url U --key K --mock M --sessions 1000 --concurrency 8 --expect 1000
//	sessload throughput --url U1,U2,U3 --key K1,K2 --sessions 200 --concurrency 16
//
// The server's model must be the bench mock (bench/cmd/mock); roundtrip
// needs it started with --record-arrivals, and M is its root URL (without
// /v1); park reads its counts. Every session is the task of package task: an inline agent with
// one client-side tool, read_file, that the mock calls five times (as
// configured) before its final answer.
//
//   - warmup runs sessions to their end with Client.RunSession, the tool
//     running here, and checks that each completed.
//   - roundtrip runs sessions one at a time, posting each tool result by
//     hand: a sample is the time from just before the post to the arrival
//     of the next model request at the mock, read from the mock's
//     arrival log. Both are wall-clock (CLOCK_REALTIME) times of this
//     machine.
//   - wakeup parks one session, pauses it, and then, sample after sample,
//     holds a long-poll (GET .../changes) open on it, waits a moment so
//     that the server is waiting, and posts a message: a sample is the
//     time from just before the post to the return of the long-poll, with
//     the message's event in it.
//   - park creates sessions from --concurrency goroutines, then waits until
//     --expect sessions of the key wait in awaiting_tool_results (each has
//     made its first model request and is parked on the tool call). It
//     watches the mock's request count until every session has made its
//     model request, and only then lists the parked sessions, so that it
//     does not load the server while it works. With --idempotency-key
//     (the default) sessions are created with the SDK, which sends a
//     random Idempotency-Key with each; without, with a plain POST of the
//     same body and no key.
//   - throughput runs sessions to their end as warmup does, --concurrency
//     at once, the i-th session talking to the (i mod n)-th of the n
//     servers --url lists (replicas sharing a store) with the
//     ((i / n) mod k)-th of the k keys --key lists, and reports the time
//     they took.
//
// No request is retried (the SDK's MaxAttempts is 1): an error ends the
// run, so that a failure shows instead of a slow figure.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hrns-dev/hrns/bench/internal/mock"
	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sessload:", err)
		os.Exit(1)
	}
}

// Result is the line a run prints; the fields of the other jobs are zero.
type Result struct {
	Job string `json:"job"`
	// Sessions is the number of sessions the run created.
	Sessions int `json:"sessions"`
	// SamplesNS are the round trips (roundtrip) or wake-ups (wakeup),
	// in nanoseconds.
	SamplesNS []int64 `json:"samples_ns,omitempty"`
	// CreateNS is the time from the first create to the last answer
	// (park); ParkNS from the first create until every session expected
	// was parked.
	CreateNS int64 `json:"create_ns,omitempty"`
	ParkNS   int64 `json:"park_ns,omitempty"`
	// CreateLatencyNS are the durations of each create (park).
	CreateLatencyNS []int64 `json:"create_latency_ns,omitempty"`
	// ElapsedNS is the time the sessions took, first create to last end
	// (throughput).
	ElapsedNS int64 `json:"elapsed_ns,omitempty"`
}

type options struct {
	url, key, mockURL   string
	sessions, samples   int
	concurrency, expect int
	settle              time.Duration
	timeout             time.Duration
	idempotencyKey      bool
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: sessload warmup|roundtrip|wakeup|park [flags]")
	}
	job := args[0]
	var o options
	fs := flag.NewFlagSet("sessload "+job, flag.ContinueOnError)
	fs.StringVar(&o.url, "url", "", "the sessions server, such as http://127.0.0.1:8080 (throughput: a comma-separated list)")
	fs.StringVar(&o.key, "key", "", "its API key (throughput: a comma-separated list, the sessions spread over them)")
	fs.StringVar(&o.mockURL, "mock", "", "the mock's root URL, without /v1 (roundtrip)")
	fs.IntVar(&o.sessions, "sessions", 10, "sessions to create")
	fs.IntVar(&o.samples, "samples", 100, "wake-ups to measure (wakeup)")
	fs.IntVar(&o.concurrency, "concurrency", 8, "sessions created (park) or run (warmup) at once")
	fs.IntVar(&o.expect, "expect", 0, "parked sessions of the key to wait for (park; default --sessions)")
	fs.DurationVar(&o.settle, "settle", 20*time.Millisecond, "wait between opening a long-poll and posting (wakeup)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "bound on the whole run")
	fs.BoolVar(&o.idempotencyKey, "idempotency-key", true, "create with the SDK, which sends an Idempotency-Key; false: a plain POST without one (park)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.url == "" {
		return errors.New("--url is required")
	}
	if o.sessions < 1 || o.samples < 1 || o.concurrency < 1 {
		return errors.New("--sessions, --samples and --concurrency must be at least 1")
	}
	if o.expect == 0 {
		o.expect = o.sessions
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	urls := strings.Split(o.url, ",")
	if len(urls) > 1 && job != "throughput" {
		return errors.New("only throughput takes several --url")
	}
	o.url = urls[0]
	keys := strings.Split(o.key, ",")
	if len(keys) > 1 && job != "throughput" {
		return errors.New("only throughput takes several --key")
	}
	o.key = keys[0]
	l := newLoad(&o)
	// Session i goes to replica i mod n, with key (i / n) mod k: the
	// sessions at once are spread evenly over both.
	for _, k := range keys {
		for _, u := range urls {
			l.replicas = append(l.replicas, client.New(u, k, &client.Options{HTTPClient: l.http, MaxAttempts: 1}))
		}
	}
	var (
		res *Result
		err error
	)
	switch job {
	case "warmup":
		res, err = l.warmup(ctx)
	case "roundtrip":
		if o.mockURL == "" {
			return errors.New("roundtrip needs --mock")
		}
		res, err = l.roundTrip(ctx)
	case "park":
		if o.mockURL == "" {
			return errors.New("park needs --mock")
		}
		res, err = l.park(ctx)
	case "wakeup":
		res, err = l.wakeUp(ctx)
	case "throughput":
		res, err = l.throughput(ctx)
	default:
		return fmt.Errorf("unknown job %q: want warmup, roundtrip, wakeup, park or throughput", job)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", job, err)
	}
	res.Job = job
	return json.NewEncoder(stdout).Encode(res)
}

// load is a client of the server with the task's request and tool.
type load struct {
	o        *options
	c        *client.Client
	replicas []*client.Client // a client of each server (throughput)
	http     *http.Client
	tool     *loop.ToolDef
}

func newLoad(o *options) *load {
	// Enough idle connections for every goroutine, so that no request
	// pays for a new connection once the first round is made.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: o.concurrency + 8, DisableCompression: true}}
	return &load{
		o:    o,
		http: hc,
		c:    client.New(o.url, o.key, &client.Options{HTTPClient: hc, MaxAttempts: 1}),
		tool: loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
			return task.Read(in.Path), nil
		}),
	}
}

// request is the task as a session: the mock scripts the rest.
func request() *client.SessionRequest {
	return &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "bench-agent", Description: "Reads notes and summarises them.", Instructions: task.System}},
		Messages: client.Text(task.Prompt),
	}
}

func (l *load) warmup(ctx context.Context) (*Result, error) {
	err := l.parallel(ctx, l.o.sessions, func(ctx context.Context, _ int) error {
		res, err := l.c.RunSession(ctx, request(), l.tool)
		if err != nil {
			return err
		}
		if res.Status != session.StatusCompleted || res.Answer == "" {
			return fmt.Errorf("session %s ended %s (%s) with an answer of %d bytes", res.SessionID, res.Status, res.Error, len(res.Answer))
		}
		return nil
	})
	return &Result{Sessions: l.o.sessions}, err
}

func (l *load) throughput(ctx context.Context) (*Result, error) {
	start := time.Now()
	err := l.parallel(ctx, l.o.sessions, func(ctx context.Context, i int) error {
		res, err := l.replicas[i%len(l.replicas)].RunSession(ctx, request(), l.tool)
		if err != nil {
			return err
		}
		if res.Status != session.StatusCompleted || res.Answer == "" {
			return fmt.Errorf("session %s ended %s (%s) with an answer of %d bytes", res.SessionID, res.Status, res.Error, len(res.Answer))
		}
		return nil
	})
	return &Result{Sessions: l.o.sessions, ElapsedNS: int64(time.Since(start))}, err
}

// parallel runs f(i) for i in [0, n) from l.o.concurrency goroutines, and
// returns the first error.
func (l *load) parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(l.o.concurrency, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// follower follows one session's events from a cursor.
type follower struct {
	h       *client.Handle
	cursor  int64
	status  session.Status
	pending []client.ToolRequest
	kinds   []string // AgentEvent kinds of the last batch
}

// next long-polls once and takes in the new events.
func (f *follower) next(ctx context.Context) error {
	c, err := f.h.Changes(ctx, &client.ChangesOptions{FromIndex: f.cursor, Wait: 25 * time.Second})
	if err != nil || c == nil {
		return err
	}
	f.take(c)
	return nil
}

func (f *follower) take(c *client.Changes) {
	f.kinds = f.kinds[:0]
	for _, e := range c.NewEvents {
		switch e.Type {
		case session.EventActiveState:
			var as session.ActiveState
			if json.Unmarshal(e.Data, &as) == nil {
				f.pending = as.PendingToolCalls
			}
		case session.EventAgent:
			var d struct {
				Kind string `json:"kind"`
			}
			json.Unmarshal(e.Data, &d)
			f.kinds = append(f.kinds, d.Kind)
		}
	}
	f.cursor += int64(len(c.NewEvents))
	f.status = c.Status
}

// parked waits until the session waits for tool results with calls
// pending, or has ended.
func (f *follower) parked(ctx context.Context) error {
	for {
		if f.status.Terminal() || f.status == session.StatusAwaitingToolResults && len(f.pending) > 0 {
			return nil
		}
		if err := f.next(ctx); err != nil {
			return err
		}
	}
}

// results answers the pending calls as the tool would.
func results(pending []client.ToolRequest) ([]client.ToolResult, error) {
	var out []client.ToolResult
	for _, p := range pending {
		text, err := task.ReadArgs(p.Args)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(text)
		out = append(out, client.ToolResult{Kind: session.KindToolResult, ToolReq: p, Result: b})
	}
	return out, nil
}

func (l *load) roundTrip(ctx context.Context) (*Result, error) {
	res := &Result{}
	seen, err := l.arrivals(ctx, 1<<62)
	if err != nil {
		return nil, err
	}
	from := seen.Total
	for range l.o.sessions {
		h, err := l.c.StartSession(ctx, request(), l.tool)
		if err != nil {
			return nil, err
		}
		res.Sessions++
		f := &follower{h: h}
		if err := f.parked(ctx); err != nil {
			return nil, err
		}
		from++ // the first model request
		for !f.status.Terminal() {
			rs, err := results(f.pending)
			if err != nil {
				return nil, err
			}
			f.pending = nil
			posted := time.Now().UnixNano()
			if err := h.PostToolResults(ctx, rs...); err != nil {
				return nil, err
			}
			if err := f.parked(ctx); err != nil {
				return nil, err
			}
			a, err := l.arrivals(ctx, from)
			if err != nil {
				return nil, err
			}
			if len(a.UnixNano) != 1 {
				return nil, fmt.Errorf("the mock saw %d model requests after a tool result, want 1 (is anything else using it?)", len(a.UnixNano))
			}
			from++
			res.SamplesNS = append(res.SamplesNS, a.UnixNano[0]-posted)
		}
		if f.status != session.StatusCompleted {
			return nil, fmt.Errorf("session %s ended %s", h.ID(), f.status)
		}
	}
	return res, nil
}

// arrivals reads the mock's arrival log from the from-th request.
func (l *load) arrivals(ctx context.Context, from int) (*mock.Arrivals, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/arrivals?from=%d", strings.TrimSuffix(l.o.mockURL, "/"), from), nil)
	if err != nil {
		return nil, err
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var a mock.Arrivals
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, fmt.Errorf("mock arrivals: %w", err)
	}
	return &a, nil
}

// wakeUpPerSession is how many wake-ups the wakeup job times on one
// paused session before it pauses another: each sample leaves a message in
// the session's inbox, and with every sample on one session the job timed
// a state that grew by a message each time (3.0 ms p50 at 30 samples,
// 4.3 ms at 600, on one machine), not the wake-up.
const wakeUpPerSession = 10

func (l *load) wakeUp(ctx context.Context) (*Result, error) {
	res := &Result{}
	type polled struct {
		at  time.Time
		c   *client.Changes
		err error
	}
	var h *client.Handle
	var f *follower
	for i := range l.o.samples {
		if i%wakeUpPerSession == 0 {
			if h != nil {
				h.Cancel(context.WithoutCancel(ctx))
			}
			var err error
			if h, f, err = l.paused(ctx); err != nil {
				return nil, err
			}
			res.Sessions++
		}
		done := make(chan polled, 1)
		go func() {
			c, err := h.Changes(ctx, &client.ChangesOptions{FromIndex: f.cursor, Wait: 25 * time.Second})
			done <- polled{time.Now(), c, err}
		}()
		time.Sleep(l.o.settle) // the long-poll reaches the server and waits
		sent := time.Now()
		if err := h.SendMessage(ctx, "ping"); err != nil {
			return nil, err
		}
		p := <-done
		if p.err != nil {
			return nil, p.err
		}
		if p.c == nil || p.at.Before(sent) {
			return nil, errors.New("the long-poll returned before the message was posted")
		}
		f.take(p.c)
		if !contains(f.kinds, session.KindMessage) {
			return nil, fmt.Errorf("the long-poll returned without the message's event (kinds %v)", f.kinds)
		}
		res.SamplesNS = append(res.SamplesNS, int64(p.at.Sub(sent)))
	}
	if h != nil {
		h.Cancel(context.WithoutCancel(ctx))
	}
	return res, nil
}

// paused starts a session, waits until it waits for its first tool
// result, and pauses it.
func (l *load) paused(ctx context.Context) (*client.Handle, *follower, error) {
	h, err := l.c.StartSession(ctx, request(), l.tool)
	if err != nil {
		return nil, nil, err
	}
	f := &follower{h: h}
	fail := func(err error) (*client.Handle, *follower, error) {
		h.Cancel(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	if err := f.parked(ctx); err != nil {
		return fail(err)
	}
	if f.status.Terminal() {
		return fail(fmt.Errorf("session %s ended %s before its first tool call", h.ID(), f.status))
	}
	if err := h.Pause(ctx); err != nil {
		return fail(err)
	}
	for f.status != session.StatusPaused {
		if err := f.next(ctx); err != nil {
			return fail(err)
		}
	}
	return h, f, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func (l *load) park(ctx context.Context) (*Result, error) {
	res := &Result{Sessions: l.o.sessions, CreateLatencyNS: make([]int64, l.o.sessions)}
	before, err := l.mockStats(ctx)
	if err != nil {
		return nil, err
	}
	create := func(ctx context.Context) error {
		_, err := l.c.StartSession(ctx, request(), l.tool)
		return err
	}
	if !l.o.idempotencyKey {
		body, err := json.Marshal(l.declared())
		if err != nil {
			return nil, err
		}
		create = func(ctx context.Context) error { return l.post(ctx, "/api/v2/sessions", body, http.StatusCreated) }
	}
	start := time.Now()
	err = l.parallel(ctx, l.o.sessions, func(ctx context.Context, i int) error {
		t := time.Now()
		err := create(ctx)
		res.CreateLatencyNS[i] = int64(time.Since(t))
		return err
	})
	if err != nil {
		return nil, err
	}
	res.CreateNS = int64(time.Since(start))
	// Every session makes one model request, then parks.
	for {
		st, err := l.mockStats(ctx)
		if err != nil {
			return nil, err
		}
		if st.Rejected > before.Rejected {
			return nil, fmt.Errorf("the mock refused %d requests", st.Rejected-before.Rejected)
		}
		if st.Requests-before.Requests >= int64(l.o.sessions) {
			break
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return nil, fmt.Errorf("%d of %d sessions made their model request: %w", st.Requests-before.Requests, l.o.sessions, err)
		}
	}
	awaiting := []client.Status{session.StatusAwaitingToolResults}
	for {
		p, err := l.c.ListSessions(ctx, &client.ListOptions{Statuses: awaiting, Size: 1})
		if err != nil {
			return nil, err
		}
		if p.Total >= l.o.expect {
			if p.Total > l.o.expect {
				return nil, fmt.Errorf("%d sessions are parked, want %d", p.Total, l.o.expect)
			}
			break
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return nil, fmt.Errorf("%d of %d sessions parked: %w", p.Total, l.o.expect, err)
		}
	}
	res.ParkNS = int64(time.Since(start))
	failed, err := l.c.ListSessions(ctx, &client.ListOptions{Statuses: []client.Status{session.StatusFailed}, Size: 1})
	if err != nil {
		return nil, err
	}
	if failed.Total > 0 {
		return nil, fmt.Errorf("%d sessions failed", failed.Total)
	}
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// declared is request() with the tool declared on its agent, as the SDK
// sends it.
func (l *load) declared() *client.SessionRequest {
	req := request()
	req.Agent.Inline.Tools = []client.ToolDefinition{{Name: l.tool.Name, Description: l.tool.Description, InputSchema: l.tool.InputSchema}}
	return req
}

// post sends body to the server without the SDK, and wants the status.
func (l *load) post(ctx context.Context, path string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(l.o.url, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.o.key)
	resp, err := l.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d, want %d: %s", path, resp.StatusCode, want, bytes.TrimSpace(b))
	}
	return nil
}

// mockStats reads the mock's counts.
func (l *load) mockStats(ctx context.Context) (*mock.Stats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(l.o.mockURL, "/")+"/stats", nil)
	if err != nil {
		return nil, err
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st mock.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("mock stats: %w", err)
	}
	return &st, nil
}
