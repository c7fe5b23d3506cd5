package session_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// The model-based test of the runtime (issue 31): random sequences of a
// caller's actions on a few sessions of one owner, interleaved with
// restarts of the process (a new Manager on the same store), failed store
// writes and slow steps, each checked against a small reference model of
// what the runtime must do. Every sequence is one seed; a failure prints
// it, and the seeds in testdata/modeltest_seeds.txt are replayed first on
// every run. Random sequences add child sessions (see mtSeq.children): a
// parent's step starts children that wait, the reference holds them as
// sessions, and their ends, a parent's cancel or force answer while they
// wait, messages queued meanwhile, restarts and failed deliveries are
// checked against the documented rules (checkDelivery).
//
//	go test -run TestModelBased ./session/                            # a few seconds per store
//	go test -run TestModelBased ./session/ -modeltest.duration=10m    # long
//	go test -run TestModelBased ./session/ -modeltest.seed=1234 -v    # one sequence, its actions logged
//
// HRNS_MODELTEST_DURATION sets the duration too (for CI); PostgreSQL runs
// as the other tests' (HRNS_TEST_POSTGRES).
var (
	mtDuration = flag.Duration("modeltest.duration", 0, "how long TestModelBased runs random sequences on each store (default 1s, or $HRNS_MODELTEST_DURATION)")
	mtSeed     = flag.Uint64("modeltest.seed", 0, "run only this sequence of TestModelBased, logging its actions")
	mtSurvey   = flag.Bool("modeltest.survey", false, "count every broken invariant as a known bug, and list them with a seed of each")
)

// knownBugs are the invariants the runtime on main is known to break,
// with the issue that reports each: a violation of one of them is logged,
// not failed, and the session is checked no further. Remove an entry
// when its fix lands; every other invariant fails the test. None is
// known today: every invariant fails the test.
var knownBugs = map[string]string{}

// mtCallTick finds the tick of the request that made a call in its id.
var mtCallTick = regexp.MustCompile(`\.r(\d+)\.\d+$`)

// mtMaxActive is the owner's limit of active sessions in the sequences.
const mtMaxActive = 2

func mtBudget() time.Duration {
	if *mtDuration > 0 {
		return *mtDuration
	}
	if d, err := time.ParseDuration(os.Getenv("HRNS_MODELTEST_DURATION")); err == nil && d > 0 {
		return d
	}
	return time.Second
}

// An mtSeedLine is a regression seed: its sequence, and whether it was
// found with the child sessions' seams (see mtSeq.children). A line of
// testdata/modeltest_seeds.txt is "N" or "N children".
type mtSeedLine struct {
	n        uint64
	children bool
}

// mtSeeds reads the regression seeds.
func mtSeeds(t *testing.T) []mtSeedLine {
	f, err := os.Open("testdata/modeltest_seeds.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mtSeedLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || len(fields) > 2 || len(fields) == 2 && fields[1] != "children" {
			t.Fatalf("testdata/modeltest_seeds.txt: %q: want a seed, and \"children\" or nothing", line)
		}
		out = append(out, mtSeedLine{n: n, children: len(fields) == 2})
	}
	return out
}

// TestModelBased runs sequences on each store: the regression seeds, then
// random ones for the duration.
func TestModelBased(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		stats := map[string]int{}
		run := func(seed mtSeedLine) bool {
			q := &mtSeq{t: t, seed: seed.n, base: st, stats: stats, verbose: *mtSeed != 0, children: seed.children}
			q.run()
			stats["sequences"]++
			if q.st != nil {
				// Claims lost under load, which the dispatcher
				// recovers unless RecoverClaim fails too (see check).
				if n := int(q.st.claimErrors.Load()); n > 0 {
					stats["claims that answered an error"] += n
				}
				if n := int(q.st.recoverErrors.Load()); n > 0 {
					stats["claim recoveries that answered an error"] += n
				}
			}
			return !t.Failed()
		}
		seeds := mtSeeds(t)
		if *mtSeed != 0 {
			// A seed of the file replays as it was found; any other
			// with the child sessions' seams.
			seed := mtSeedLine{n: *mtSeed, children: true}
			if i := slices.IndexFunc(seeds, func(s mtSeedLine) bool { return s.n == *mtSeed }); i >= 0 {
				seed = seeds[i]
			}
			run(seed)
			t.Logf("seed %d: %v", *mtSeed, stats)
			return
		}
		for _, seed := range seeds {
			if !run(seed) {
				return
			}
		}
		deadline := time.Now().Add(mtBudget())
		for time.Now().Before(deadline) {
			if !run(mtSeedLine{n: rand.Uint64N(1 << 40), children: true}) {
				return
			}
		}
		t.Logf("model-based test: %v", stats)
	})
}

// mtSession is the reference model of one session.
type mtSession struct {
	key    string // "s2": the tags' prefix
	id     string
	format bool // has an answer_format
	// The state predicted at rest.
	phase     string // "queued", "wait", "run" (paused with its calls settled), "done"
	status    session.Status
	clients   int    // client calls it waits for
	approvals int    // calls waiting for a decision
	paused    bool   //
	inbox     string // the directive of the last message not yet read, if any
	waiting   string // the directive whose calls it waits for
	forced    bool   // the prediction follows a force answer
	mark      int    // disruptions() when the prediction was made
	first     string // a queued session's directive
	// What the caller did.
	next     int // the next message's number
	msgs     []mtMsg
	forces   [][2]int64        // ticks before ForceAnswer and after it returned
	cancels  [][2]int64        // ticks before and after Cancel
	approved map[string]bool   // call ids approved
	tainted  string            // the known bug seen, after which it is not checked
	created  int64             //
	decided  map[string]string //
	desk     *mtDesk           // its agent has the user's desktop (model_desktop_test.go)
	// Child sessions. A parent's delegate-approve and delegate2 start
	// children that wait for a decision; the parent waits for them.
	parent  *mtSession // the session whose step started this one (a child)
	kids    int        // (a parent) the children it waits for
	unbound int        // (a parent) of those, the ones not yet found in the store (see adopt)
	owed    bool       // (a child) its parent waits for its end
	// delivered: (a child) it ended while its parent waited for it, whose
	// delegate call must have its end as its result, once.
	delivered bool
}

// mtMsg is a message the session accepted: its tag, and the ticks before
// the call that sent it and after it returned.
type mtMsg struct {
	tag           string
	before, after int64
}

// mtSeq is one sequence: a store, a world, the manager of the moment and
// the sessions.
type mtSeq struct {
	t       *testing.T
	seed    uint64
	base    store.Store
	stats   map[string]int
	verbose bool

	n        int64 // the sequence's number in the process, in its tags
	rng      *rand.Rand
	st       *failingStore
	w        *mtWorld
	m        *session.Manager
	owner    string
	sessions []*mtSession
	restarts int // managers started
	actMark  int // disruptions() before the action of the moment
	log      mtLog
	// queuedStuck is set once a queued session was seen left behind.
	queuedStuck bool
	actions     []string
	failed      bool
	// desktop adds the seams of model_desktop_test.go: sessions with the
	// user's desktop, and stops that land inside a claim or a step.
	desktop bool
	// children adds the child sessions' seams: parents whose step starts
	// one or two children that wait for a decision (delegate-approve,
	// delegate2), the children in the reference (see adopt), acted on as
	// sessions, a restart right after an action on one, and failed
	// deliveries of a child's end to its parent. Off, the sequence of a
	// seed is the one it was before they came (the older regression
	// seeds replay so).
	children bool
	images   int64 // the images posted so far
}

func (q *mtSeq) logf(format string, args ...any) {
	a := fmt.Sprintf(format, args...)
	q.actions = append(q.actions, a)
	if q.verbose {
		q.t.Log(a)
	}
}

// violation reports a broken invariant of session s (nil: the
// sequence's): a known bug is counted and taints the session, anything
// else fails the test with the seed and the actions that led to it.
func (q *mtSeq) violation(s *mtSession, invariant, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if issue, ok := knownBugs[invariant]; ok || *mtSurvey {
		q.stats["known:"+invariant]++
		if _, ok := q.stats["seed:"+invariant]; !ok {
			q.stats["seed:"+invariant] = int(q.seed)
			q.t.Logf("%s: first seen with seed %d: %s\n  %s", invariant, q.seed, msg, strings.Join(q.actions, "\n  "))
			for _, o := range q.sessions {
				q.dump(o)
			}
			q.t.Logf("the managers' log:\n%s", q.log.String())
		}
		if s != nil && s.tainted == "" {
			s.tainted = invariant
		}
		if q.verbose {
			q.t.Logf("known bug %s (%s): %s", invariant, issue, msg)
			for _, o := range q.sessions {
				q.dump(o)
			}
			q.t.Logf("the managers' log:\n%s", q.log.String())
		}
		return
	}
	if s != nil && s.tainted == "" {
		s.tainted = invariant
	}
	if !q.failed {
		q.t.Errorf("seed %d: invariant %s broken: %s\nactions:\n  %s", q.seed, invariant, msg, strings.Join(q.actions, "\n  "))
		for _, o := range q.sessions {
			q.dump(o)
		}
		q.t.Logf("the managers' log:\n%s", q.log.String())
	}
	q.failed = true
}

func (q *mtSeq) newManager() {
	q.restarts++
	q.m = session.New(q.st, q.w, &session.Options{
		Environments:      map[string]*loop.Toolset{"lab": q.w.tools()},
		Permissions:       mtPermissions,
		MaxActiveSessions: mtMaxActive,
		LeaseTTL:          400 * time.Millisecond,
		// Each failed worker write, failed delivery of a child's end and
		// run cut by a lease lost under load costs a session an attempt,
		// as designed (TestStoreErrorsRetried, TestLostClaimsChargeNoAttempt
		// test the bound itself): the sequences inject up to two failed
		// writes and two failed deliveries at a time, and a loaded
		// machine adds lapses, so the bound here leaves room for them
		// (a run of CI failed at the default 3: two failed writes and a
		// lapse gave a session up that the reference completes).
		MaxAttempts: 6,
		Logger:      slog.New(slog.NewTextHandler(&q.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	// A delivery lost to a restart or a failed write is made by the
	// parent's periodic check of its children: every 250 ms here, so
	// that the test waits for it (a minute in production).
	session.SetChildCheck(q.m, mtChildCheck)
	if err := q.m.Start(context.Background()); err != nil {
		q.t.Fatal(err)
	}
}

// mtChildCheck is how often a parent waiting for children checks them.
const mtChildCheck = 250 * time.Millisecond

func (q *mtSeq) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := q.m.Stop(ctx); err != nil {
		q.t.Fatalf("seed %d: Stop: %v", q.seed, err)
	}
}

func (q *mtSeq) run() {
	q.rng = rand.New(rand.NewPCG(q.seed, q.seed>>32|1))
	q.st = &failingStore{Store: q.base}
	q.w = newWorld()
	q.owner = fmt.Sprintf("mt%d", q.seed)
	q.n = mtSequences.Add(1)
	q.newManager()
	defer q.end()
	steps := 8 + q.rng.IntN(16)
	if q.desktop {
		steps += 16 // waits for the desktop take more steps
	}
	for range steps {
		if q.failed {
			return
		}
		var pause *mtPause
		mark := len(q.actions)
		if q.desktop {
			pause = q.armPause()
		}
		q.act()
		if q.desktop {
			q.stopAtOnce(pause, mark)
		}
		q.settle()
		q.adopt()
		q.check()
		q.stats["actions"]++
	}
}

// disruptions counts the restarts and failed writes so far: a child's
// end lost to one is delivered by its parent's periodic check of its
// children (a minute), later than a test waits.
func (q *mtSeq) disruptions() int { return q.restarts + q.st.failures() }

// mtSequences numbers the sequences of the process.
var mtSequences atomic.Int64

// end stops the sequence: its sessions are cancelled, so that none runs
// in a later one, its gates opened, its manager stopped.
func (q *mtSeq) end() {
	ctx := context.Background()
	if n := q.st.deliveriesDone(); n > 0 {
		q.stats["deliveries failed"] += n
	}
	q.w.release("*")
	all, _, err := q.base.ListSessions(ctx, &store.ListParams{Owner: q.owner, Limit: 1000})
	if err == nil {
		for _, s := range all {
			q.m.Cancel(ctx, q.owner, s.ID)
		}
	}
	q.stop()
}

// directive picks what the model does with a message.
func (q *mtSeq) directive(s *mtSession) string {
	ds := []string{"answer", "answer", "client", "client", "client2", "server", "deny", "approve", "fail", "mute", "panic", "delegate", "delegate-fail", "delegate-panic"}
	if q.children {
		ds = append(ds, "delegate-approve", "delegate-approve", "delegate2")
	}
	if s.parent != nil {
		// A child's agent (the subagent helper) has neither the
		// caller's tool nor subagents.
		ds = []string{"answer", "server", "deny", "approve", "approve", "fail"}
	}
	if s.format {
		ds = append(ds, "badjson", "badjson")
	}
	if s.desk != nil && q.rng.IntN(2) == 0 {
		ds = []string{"computer", "computer", "computer", "computer2"}
	}
	return ds[q.rng.IntN(len(ds))]
}

func (q *mtSeq) tag(s *mtSession, directive string) string {
	t := fmt.Sprintf("%s.m%d %s", s.key, s.next, directive)
	s.next++
	return t
}

// act does one random action of the caller, or of the world.
func (q *mtSeq) act() {
	ctx := context.Background()
	q.actMark = q.disruptions()
	if q.tops() == 0 || q.tops() < 5 && q.rng.IntN(6) == 0 {
		q.create(ctx)
		return
	}
	defer q.deliverEnds()
	switch n := q.rng.IntN(20); {
	case n == 0:
		q.logf("restart")
		q.stop()
		q.newManager()
		return
	case n == 1:
		skip, fails := q.rng.IntN(4), 1+q.rng.IntN(2)
		q.st.arm(skip, fails)
		q.logf("fail %d worker writes after %d", fails, skip)
		return
	case n == 2 && q.children:
		fails := 1 + q.rng.IntN(2)
		q.st.failDeliveries(fails)
		q.logf("fail the next %d deliveries of a child's end", fails)
		return
	}
	s := q.sessions[q.rng.IntN(len(q.sessions))]
	if kin := slices.DeleteFunc(slices.Clone(q.sessions), func(c *mtSession) bool { return !c.owed && c.kids == 0 }); len(kin) > 0 && q.rng.IntN(2) == 0 {
		s = kin[q.rng.IntN(len(kin))] // a child its parent waits for, or that parent
	}
	if s.tainted != "" {
		return
	}
	if s.parent != nil && s.phase == "done" {
		return // a child is not started again
	}
	if s.parent != nil && q.rng.IntN(4) == 0 {
		// Its end (if the action ends it) is being delivered to its
		// parent when the process restarts.
		defer func() {
			q.logf("restart after acting on child %s", s.key)
			q.stats["restarts after acting on a child"]++
			q.stop()
			q.newManager()
		}()
	}
	switch s.phase {
	case "done":
		if q.rng.IntN(3) == 0 {
			q.slowStep(ctx, s)
			return
		}
		q.send(ctx, s, 1+q.rng.IntN(2))
		q.runOn(s, s.inbox)
	case "wait":
		q.actWaiting(ctx, s)
	case "run": // paused, its calls settled
		switch q.rng.IntN(3) {
		case 0:
			q.resume(ctx, s)
		case 1:
			q.send(ctx, s, 1)
			s.paused = false
			q.runOn(s, s.inbox)
		default:
			q.cancel(ctx, s)
		}
	}
}

func (q *mtSeq) create(ctx context.Context) {
	s := &mtSession{key: fmt.Sprintf("q%ds%d", q.n, len(q.sessions)), format: q.rng.IntN(3) == 0, approved: map[string]bool{}, decided: map[string]string{}}
	if q.desktop && q.rng.IntN(4) > 0 {
		s.desk = newDesk()
	}
	d := q.directive(s)
	text := q.tag(s, d)
	agent := map[string]any{"name": "mt", "environments": []string{"lab"},
		"subagents": []any{map[string]any{"name": "helper", "description": "does a part", "environments": []string{"lab"}}},
		"tools":     []any{map[string]any{"name": "ask_client", "description": "the caller answers", "input_schema": map[string]any{"type": "object"}}}}
	if s.desk != nil {
		agent["environments"] = []any{"lab", map[string]any{"kind": "desktop", "host": "user_device", "id": "laptop"}}
	}
	if s.format {
		agent["answer_format"] = map[string]any{"type": "object", "required": []string{"ok"}}
	}
	body, _ := json.Marshal(map[string]any{"agent": agent, "messages": text})
	var req session.Request
	if err := json.Unmarshal(body, &req); err != nil {
		q.t.Fatal(err)
	}
	before := q.w.clock.tick()
	v, _, err := q.m.Create(ctx, &session.CreateParams{Owner: q.owner, Request: &req, Raw: body})
	after := q.w.clock.tick()
	if err != nil {
		q.t.Fatalf("seed %d: Create: %v", q.seed, err)
	}
	s.id, s.created = v.ID, after
	s.msgs = append(s.msgs, mtMsg{tag: strings.Fields(text)[0], before: before, after: after})
	q.sessions = append(q.sessions, s)
	q.logf("create %s (%s) format=%v desktop=%v: %s", s.key, s.id, s.format, s.desk != nil, v.Status.Status)
	if q.active() >= mtMaxActive {
		s.phase, s.status, s.first = "queued", session.StatusQueued, d
		return
	}
	q.runOn(s, d)
}

// tops counts the sessions the caller created.
func (q *mtSeq) tops() int {
	n := 0
	for _, s := range q.sessions {
		if s.parent == nil {
			n++
		}
	}
	return n
}

// active counts the sessions the reference holds active.
func (q *mtSeq) active() int {
	n := 0
	for _, s := range q.sessions {
		if s.phase == "wait" || s.phase == "run" {
			n++
		}
	}
	return n
}

// runOn predicts the end of a run whose last unread message has
// directive d: the model acts on it, and answers after its tool calls.
func (q *mtSeq) runOn(s *mtSession, d string) {
	s.inbox, s.paused, s.clients, s.approvals, s.forced, s.kids, s.unbound = "", false, 0, 0, false, 0, 0
	d = strings.TrimPrefix(d, "slow-")
	s.waiting, s.mark = d, q.actMark
	switch d {
	case "delegate-approve":
		s.phase, s.status, s.kids, s.unbound = "wait", session.StatusAwaitingToolResults, 1, 1
	case "delegate2":
		s.phase, s.status, s.kids, s.unbound = "wait", session.StatusAwaitingToolResults, 2, 2
	case "client", "mute", "computer":
		s.phase, s.status, s.clients = "wait", session.StatusAwaitingToolResults, 1
	case "client2", "computer2":
		s.phase, s.status, s.clients = "wait", session.StatusAwaitingToolResults, 2
	case "approve":
		s.phase, s.status, s.approvals = "wait", session.StatusAwaitingToolResults, 1
	case "fail", "panic":
		s.phase, s.status = "done", session.StatusFailed
	default: // answer, server, deny, badjson, slowtool, stuck, or none
		s.phase, s.status = "done", session.StatusCompleted
	}
	if s.phase == "done" {
		q.promote()
	}
}

// forcedEnd predicts the end of a run asked for its final answer, whose
// last message has directive d: the answer, or no_answer when the model
// says nothing.
func (q *mtSeq) forcedEnd(s *mtSession, d string) {
	status := session.StatusCompleted
	if d == "mute" {
		status = session.StatusFailed
	}
	s.phase, s.status, s.clients, s.approvals, s.inbox, s.forced = "done", status, 0, 0, "", true
	q.orphan(s, nil)
	q.promote()
}

// promote starts queued sessions while the owner has room, oldest first.
func (q *mtSeq) promote() {
	for _, s := range q.sessions {
		if s.phase == "queued" && q.active() < mtMaxActive {
			q.runOn(s, s.first)
		}
	}
}

// send sends n messages (one call) to s; the last one's directive is the
// one the model acts on.
func (q *mtSeq) send(ctx context.Context, s *mtSession, n int) bool {
	var msgs []session.UserMessage
	var tags []string
	d := ""
	for range n {
		d = q.directive(s)
		text := q.tag(s, d)
		tags = append(tags, text)
		msgs = append(msgs, session.UserMessage{Message: text})
	}
	return q.sendText(ctx, s, msgs, tags, d)
}

func (q *mtSeq) sendText(ctx context.Context, s *mtSession, msgs []session.UserMessage, tags []string, d string) bool {
	if s.kids > 0 {
		q.stats["messages queued while children run"]++
	}
	before := q.w.clock.tick()
	err := q.m.SendMessages(ctx, q.owner, s.id, msgs)
	after := q.w.clock.tick()
	q.logf("message %s %q: %v", s.key, tags, err)
	if err != nil {
		q.t.Fatalf("seed %d: SendMessages: %v", q.seed, err)
	}
	for _, t := range tags {
		s.msgs = append(s.msgs, mtMsg{tag: strings.Fields(t)[0], before: before, after: after})
	}
	s.inbox = d
	return true
}

func (q *mtSeq) resume(ctx context.Context, s *mtSession) {
	err := q.m.Resume(ctx, q.owner, s.id)
	q.logf("resume %s: %v", s.key, err)
	if err != nil {
		q.t.Fatalf("seed %d: Resume: %v", q.seed, err)
	}
	s.paused = false
	if s.phase == "run" {
		q.runOn(s, s.inbox)
	} else {
		s.status = session.StatusAwaitingToolResults
	}
}

func (q *mtSeq) cancel(ctx context.Context, s *mtSession) {
	if s.kids > 0 {
		q.stats["cancels while children run"]++
	}
	before := q.w.clock.tick()
	err := q.m.Cancel(ctx, q.owner, s.id)
	after := q.w.clock.tick()
	q.logf("cancel %s: %v", s.key, err)
	if err != nil {
		q.t.Fatalf("seed %d: Cancel: %v", q.seed, err)
	}
	s.cancels = append(s.cancels, [2]int64{before, after})
	s.phase, s.status, s.paused = "done", session.StatusInterrupted, false
	q.orphan(s, &[2]int64{before, after})
	q.promote()
}

// orphan follows the end of a parent p that waited for children: the
// calls that waited for them are abandoned, and its end cancels the
// children that have not ended, theirs in turn (a cancel of the parent
// does so before Cancel returns: cancel is its ticks; a force answer
// when its final answer is committed).
func (q *mtSeq) orphan(p *mtSession, cancel *[2]int64) {
	p.kids, p.unbound = 0, 0
	for _, c := range q.sessions {
		if c.parent != p || !c.owed {
			continue
		}
		c.owed = false
		if c.phase != "done" {
			c.phase, c.status, c.paused, c.clients, c.approvals = "done", session.StatusInterrupted, false, 0, 0
			q.stats["children cancelled by their parent's end"]++
			if cancel != nil {
				c.cancels = append(c.cancels, *cancel)
			}
			q.orphan(c, cancel)
		}
	}
}

// deliverEnds gives the ends of the children that ended to their parents
// that wait for them: a parent runs on once it has them all.
func (q *mtSeq) deliverEnds() {
	for again := true; again; {
		again = false
		for _, c := range q.sessions {
			if !c.owed || c.phase != "done" {
				continue
			}
			c.owed, c.delivered = false, true
			q.stats["child ends delivered"]++
			p := c.parent
			p.kids--
			if p.phase == "wait" {
				q.settleCalls(p)
			}
			again = true
		}
	}
}

// adopt finds the children the reference's parents wait for in the store
// (their ids are the runtime's), and the children of the delegates that
// end at once, and adds them to the reference.
func (q *mtSeq) adopt() {
	if !q.children {
		return
	}
	ctx := context.Background()
	for _, p := range slices.Clone(q.sessions) {
		if p.parent != nil || p.tainted != "" {
			continue
		}
		children, _, err := q.st.ListSessions(ctx, &store.ListParams{Owner: q.owner, ParentID: p.id, Limit: 1000, Ascending: true})
		if err != nil {
			q.t.Fatal(err)
		}
		for _, got := range children {
			if slices.ContainsFunc(q.sessions, func(c *mtSession) bool { return c.id == got.ID }) {
				continue
			}
			tag, d := "", ""
			events, err := q.m.Events(ctx, q.owner, got.ID, &session.EventsParams{Page: 1, Size: 1 << 20})
			if err != nil {
				q.t.Fatalf("seed %d: Events: %v", q.seed, err)
			}
			for _, e := range events.Items {
				var a session.AgentEventData
				if e.Type != session.EventAgent || json.Unmarshal(e.Data, &a) != nil || a.Kind != session.KindMessage {
					continue
				}
				for _, m := range a.MessageContent {
					if g := mtTag.FindStringSubmatch(strings.TrimSpace(fmt.Sprint(m))); g != nil && tag == "" {
						tag, d = g[1], g[2]
					}
				}
			}
			if tag == "" {
				q.violation(p, "child-task", "%s: its child %s has no task message", p.key, got.ID)
				return
			}
			c := &mtSession{key: tag[:strings.IndexByte(tag, '.')], id: got.ID, parent: p, next: 1, approved: map[string]bool{}, decided: map[string]string{},
				msgs: []mtMsg{{tag: tag}}, waiting: d, mark: q.disruptions()}
			q.sessions = append(q.sessions, c)
			q.logf("adopt %s (%s), child of %s: %s", c.key, c.id, p.key, got.Status)
			q.stats["children"]++
			switch {
			case d == "approve" && p.unbound > 0:
				p.unbound--
				c.owed = true
				c.phase, c.status, c.approvals = "wait", session.StatusAwaitingToolResults, 1
			case d == "approve":
				// Started by a run the reference saw end (a force
				// answer, a cancel): cancelled by that end.
				c.phase, c.status = "done", session.StatusInterrupted
			case d == "fail" || d == "panic":
				c.phase, c.status, c.delivered = "done", session.StatusFailed, true
			default:
				c.phase, c.status, c.delivered = "done", session.StatusCompleted, true
			}
		}
	}
}

// forceAnswer asks s for its final answer.
func (q *mtSeq) forceAnswer(ctx context.Context, s *mtSession) {
	if s.kids > 0 {
		q.stats["force answers while children run"]++
	}
	if s.inbox != "" {
		q.stats["force answers with messages queued"]++
	}
	before := q.w.clock.tick()
	err := q.m.ForceAnswer(ctx, q.owner, s.id)
	after := q.w.clock.tick()
	q.logf("force answer %s: %v", s.key, err)
	if err != nil {
		q.t.Fatalf("seed %d: ForceAnswer: %v", q.seed, err)
	}
	s.forces = append(s.forces, [2]int64{before, after})
}

// pending reads what s waits for, from its last ActiveStateChangeEvent.
func (q *mtSeq) pending(ctx context.Context, s *mtSession) (clients, approvals []session.ToolRequest) {
	events := q.events(ctx, s)
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == session.EventActiveState {
			var a session.ActiveState
			json.Unmarshal(events[i].Data, &a)
			return a.PendingToolCalls, a.PendingApprovals
		}
	}
	return nil, nil
}

func (q *mtSeq) events(ctx context.Context, s *mtSession) []session.Event {
	p, err := q.m.Events(ctx, q.owner, s.id, &session.EventsParams{Page: 1, Size: 1 << 20})
	if err != nil {
		q.t.Fatalf("seed %d: Events: %v", q.seed, err)
	}
	return p.Items
}

// actWaiting acts on a session that waits for its calls (or is paused
// there).
func (q *mtSeq) actWaiting(ctx context.Context, s *mtSession) {
	if s.kids > 0 && s.clients == 0 && s.approvals == 0 {
		q.actParent(ctx, s)
		return
	}
	clients, approvals := q.pending(ctx, s)
	switch n := q.rng.IntN(10); {
	case n < 4 && len(clients) > 0: // a right result
		c := clients[q.rng.IntN(len(clients))]
		if c.ToolName == session.ComputerTool {
			q.postImage(ctx, s, c, clients)
			return
		}
		res := session.ToolResult{Kind: session.KindToolResult, ToolReq: c, Result: json.RawMessage(`"client says hi"`)}
		if q.rng.IntN(3) == 0 {
			res = session.ToolResult{Kind: session.KindError, ToolReq: c, Error: "client failed", Origin: "custom_tools"}
		}
		err := q.m.PostToolResults(ctx, q.owner, s.id, []session.ToolResult{res})
		q.logf("result %s %s: %v", s.key, c.ID, err)
		if err != nil {
			q.t.Fatalf("seed %d: PostToolResults: %v", q.seed, err)
		}
		s.clients--
		q.settleCalls(s)
	case n < 5: // a wrong one: no such call
		c := session.ToolRequest{ToolName: "ask_client", ID: "no-such-call", Args: json.RawMessage(`{}`)}
		err := q.m.PostToolResults(ctx, q.owner, s.id, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: c, Result: json.RawMessage(`1`)}})
		q.logf("wrong result %s: %v", s.key, err)
		if _, ok := errors.AsType[*session.ValidationError](err); !ok {
			q.violation(s, "wrong-result-accepted", "a result for a call the session does not have: %v, want a validation error", err)
		}
	case n < 7 && len(approvals) > 0:
		c := approvals[0]
		ok := q.rng.IntN(2) == 0
		err := q.m.Decide(ctx, q.owner, s.id, []session.Decision{{ID: c.ID, Approved: ok, Reason: "modeltest"}})
		q.logf("decide %s %s approved=%v: %v", s.key, c.ID, ok, err)
		if err != nil {
			q.t.Fatalf("seed %d: Decide: %v", q.seed, err)
		}
		if ok {
			s.approved[c.ID] = true
		}
		s.approvals--
		q.settleCalls(s)
	case n == 7:
		q.send(ctx, s, 1+q.rng.IntN(2))
		if s.paused {
			s.paused = false
			s.status = session.StatusAwaitingToolResults
		}
	case n == 8 && !s.paused:
		err := q.m.Pause(ctx, q.owner, s.id)
		q.logf("pause %s: %v", s.key, err)
		if err != nil {
			q.t.Fatalf("seed %d: Pause: %v", q.seed, err)
		}
		s.paused, s.status = true, session.StatusPaused
	case n == 8:
		q.resume(ctx, s)
	case n == 9 && !s.paused && q.rng.IntN(2) == 0:
		q.forceAnswer(ctx, s)
		q.forcedEnd(s, cmp.Or(s.inbox, s.waiting))
	default:
		q.cancel(ctx, s)
	}
}

// actParent acts on a parent that waits for its children (or is paused
// there): messages, which queue until they end; a force answer, which
// abandons them; a cancel, which cancels them; pause and resume; a result
// for a call it does not wait for.
func (q *mtSeq) actParent(ctx context.Context, s *mtSession) {
	switch n := q.rng.IntN(10); {
	case n < 4:
		q.send(ctx, s, 1+q.rng.IntN(2))
		if s.paused {
			s.paused = false
			s.status = session.StatusAwaitingToolResults
		}
	case n < 6 && !s.paused:
		q.forceAnswer(ctx, s)
		q.forcedEnd(s, cmp.Or(s.inbox, s.waiting))
	case n < 6, n == 7 && s.paused:
		q.resume(ctx, s)
	case n == 6:
		q.cancel(ctx, s)
	case n == 7:
		err := q.m.Pause(ctx, q.owner, s.id)
		q.logf("pause %s: %v", s.key, err)
		if err != nil {
			q.t.Fatalf("seed %d: Pause: %v", q.seed, err)
		}
		s.paused, s.status = true, session.StatusPaused
	default:
		c := session.ToolRequest{ToolName: "delegate", ID: "no-such-call", Args: json.RawMessage(`{}`)}
		err := q.m.PostToolResults(ctx, q.owner, s.id, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: c, Result: json.RawMessage(`1`)}})
		q.logf("wrong result %s: %v", s.key, err)
		if _, ok := errors.AsType[*session.ValidationError](err); !ok {
			q.violation(s, "wrong-result-accepted", "a result for a call the session does not have: %v, want a validation error", err)
		}
	}
}

// settleCalls follows an answer to one of s's calls: with none left it
// runs (unless paused) on the messages that came meanwhile.
func (q *mtSeq) settleCalls(s *mtSession) {
	if s.clients > 0 || s.approvals > 0 || s.kids > 0 {
		return
	}
	if s.paused {
		s.phase = "run"
		return
	}
	q.runOn(s, s.inbox)
}

// slowStep sends a message to the finished session s whose step blocks
// (the model's request, or a server tool deaf to cancellation or not),
// steers it while it blocks, then lets it go on.
func (q *mtSeq) slowStep(ctx context.Context, s *mtSession) {
	kinds := []string{"slow-answer", "slow-client", "slow-server", "slowtool", "stuck"}
	if s.format {
		kinds = append(kinds, "badslow", "badslow")
	}
	x := kinds[q.rng.IntN(len(kinds))]
	q.st.arm(0, 0) // a failure armed before would lose the step
	q.st.pause.Store(nil)
	text := q.tag(s, x)
	tag := strings.Fields(text)[0]
	q.sendText(ctx, s, []session.UserMessage{{Message: text}}, []string{text}, x)
	q.waitBlocked(tag)
	cancelled, forced, failing, sent := false, false, false, false
	msgAfter := ""
steer:
	for i := range 1 + q.rng.IntN(3) {
		switch n := q.rng.IntN(10); {
		case n < 3 && !failing:
			// (Not with a failed write: the step it loses is done
			// again, reading the messages.)
			q.send(ctx, s, 1+q.rng.IntN(2))
			sent = true
			if cancelled {
				// The message starts the session again at once:
				// what follows would race with its run.
				msgAfter = s.inbox
				break steer
			}
		case n < 5 && !cancelled && !forced:
			q.forceAnswer(ctx, s)
			forced = true
		case n < 7 && !cancelled:
			q.cancel(ctx, s)
			cancelled, msgAfter = true, ""
		case n < 9 && x != "stuck" && i == 0:
			// First: the run that takes over sends the same request
			// again (or runs the cut call again), which blocks again.
			// (Messages would change the request: the model acts on
			// the last one.)
			q.logf("restart during %s", tag)
			q.stop()
			q.newManager()
			if x == "badslow" {
				// The rejected answer's step is done; whether the
				// request is sent again is what is checked.
				break steer
			}
			q.waitBlocked(tag)
		case !sent:
			skip := q.rng.IntN(3)
			q.st.arm(skip, 1)
			failing = true
			q.logf("fail the worker write after %d", skip)
		}
	}
	q.logf("release %s", tag)
	q.w.release(tag)
	// The prediction. The step blocked goes on as it began unless the
	// session was cancelled: an answer ends the run (a force answer
	// asked for meanwhile is that answer), then the messages that came
	// meanwhile are read; calls wait, or are abandoned for the final
	// answer a force answer asks for, or run and the next request reads
	// the messages.
	answers := x == "slow-answer" || x == "badslow"
	switch {
	case cancelled && msgAfter == "":
		s.phase, s.status = "done", session.StatusInterrupted
	case cancelled:
		q.runOn(s, msgAfter)
	case forced && answers && s.inbox != x:
		q.runOn(s, s.inbox)
	case forced:
		q.forcedEnd(s, s.inbox)
	case s.inbox != x && x == "slow-client":
		in := s.inbox
		q.runOn(s, x)
		s.inbox = in
	default:
		q.runOn(s, s.inbox)
	}
}

// waitBlocked waits until the step of tag blocks.
func (q *mtSeq) waitBlocked(tag string) {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-q.w.blocked:
			if got == tag {
				return
			}
		case <-timeout:
			q.violation(nil, "stuck", "the step of %s never started", tag)
			q.w.release(tag)
			return
		}
	}
}

// settle waits until no session of the owner (children included) needs
// a worker: each waits, is queued, or ended.
func (q *mtSeq) settle() {
	ctx := context.Background()
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	last := "" // the grace waited for on the last pass
	for {
		all, _, err := q.st.ListSessions(ctx, &store.ListParams{Owner: q.owner, Limit: 1000})
		if err != nil {
			q.t.Fatal(err)
		}
		busy, active, queued := "", 0, false
		status := map[string]session.Status{}
		for _, got := range all {
			status[got.ID] = session.Status(got.Status)
		}
		for _, got := range all {
			switch session.Status(got.Status) {
			case session.StatusQueued:
				queued = true
			case session.StatusPending, session.StatusRunning, session.StatusPaused, session.StatusIdle, session.StatusAwaitingToolResults:
				active++
			}
			if got.Runnable || got.LeaseOwner != "" && got.LeaseUntil.After(time.Now()) || session.Workers(q.m, got.ID) > 0 ||
				got.Status == string(session.StatusRunning) || got.Status == string(session.StatusPending) {
				busy = fmt.Sprintf("%s is %s (runnable %v, lease %q)", got.ID, got.Status, got.Runnable, got.LeaseOwner)
			}
		}
		grace := time.Since(start) < 10*time.Second
		if busy == "" && !grace && last != "" {
			q.stats["grace ran out: "+last]++
			q.logf("(settle: the grace ran out after %v, waiting for %s)", time.Since(start).Round(time.Millisecond), last)
		}
		last = ""
		if busy == "" && grace && queued && active < mtMaxActive && !q.queuedStuck {
			// A session that ended promotes the queued ones after
			// its commit: give it a moment (queued-stuck says if it
			// never does).
			busy = "a queued session, with room"
			last = busy
		}
		for _, got := range all {
			// So does a child that ended deliver its end to its
			// parent (child-end-lost says if it never does).
			i := slices.IndexFunc(q.sessions, func(s *mtSession) bool { return s.id == got.ParentID })
			// (Or by the parent's periodic check of its children, when
			// a restart or a failed write lost it: every mtChildCheck.)
			if busy == "" && grace && i >= 0 && q.sessions[i].tainted == "" && strings.HasPrefix(q.sessions[i].waiting, "delegate") &&
				q.sessions[i].status != session.StatusAwaitingToolResults &&
				session.Status(got.Status).Terminal() && status[got.ParentID] == session.StatusAwaitingToolResults {
				busy = "a parent whose child ended"
				last = busy
			}
		}
		for _, c := range q.sessions {
			// A child's end the reference delivered to a parent that
			// waits for another still, or is paused: the same.
			if busy != "" || !grace || !c.delivered || c.tainted != "" || c.parent.tainted != "" ||
				status[c.parent.id] != session.StatusAwaitingToolResults && status[c.parent.id] != session.StatusPaused {
				continue
			}
			call, results := q.delegates(ctx, c.parent)
			if id, ok := call[c.key]; ok && results[id] == nil {
				busy = "a parent waiting for children, one of which ended"
				last = busy
				continue
			}
			// Given it after the list was read: the parent read again
			// says whether it moved on since (the list is stale then).
			p, err := q.st.GetSession(ctx, c.parent.id)
			if err != nil {
				q.t.Fatal(err)
			}
			if session.Status(p.Status) != status[c.parent.id] || p.Runnable {
				busy = "a parent given a child's end since the list was read"
			}
		}
		if busy == "" {
			if d := time.Since(start); d > time.Second {
				q.stats["settles over 1s"]++
			}
			return
		}
		if time.Now().After(deadline) {
			q.violation(nil, "stuck", "a session never settles: %s", busy)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// check compares every session with the reference.
func (q *mtSeq) check() {
	ctx := context.Background()
	active, queued := 0, 0
	for _, s := range q.sessions {
		v, err := q.m.Get(ctx, q.owner, s.id)
		if err != nil {
			q.t.Fatal(err)
		}
		switch v.Status.Status {
		case session.StatusQueued:
			queued++
		case session.StatusPending, session.StatusRunning, session.StatusPaused, session.StatusIdle, session.StatusAwaitingToolResults:
			active++
		}
		if s.tainted != "" {
			continue
		}
		q.checkEvents(ctx, s, v)
		q.checkRequests(s)
		q.checkRuns(s)
		if s.desk != nil && s.tainted == "" {
			q.checkDesktop(ctx, s)
		}
		if s.tainted != "" {
			continue
		}
		if v.Status.Status != s.status && s.forced && v.Status.Status == session.StatusAwaitingToolResults {
			q.violation(s, "force-answer", "%s waits for its calls after a force answer", s.key)
			continue
		}
		if s.parent == nil {
			q.checkDelivery(ctx, s)
			if s.tainted != "" {
				continue
			}
		}
		if v.Status.Status == session.StatusAwaitingToolResults && s.status != v.Status.Status && strings.HasPrefix(s.waiting, "delegate") {
			// A delivery lost to a restart or a failed write is made
			// by the parent's periodic check (every mtChildCheck
			// here), which settle waits for.
			// Did the child end before its parent committed its wait
			// (which the child's delivery then missed), or after?
			waited := time.Time{}
			for _, e := range q.events(ctx, s) {
				if e.Type == session.EventActiveState && strings.Contains(string(e.Data), `"awaiting_tool_results"`) {
					waited = e.Timestamp
				}
			}
			children, _, err := q.st.ListSessions(ctx, &store.ListParams{Owner: q.owner, ParentID: s.id, Limit: 1000})
			if err != nil {
				q.t.Fatal(err)
			}
			ended := time.Time{}
			for _, c := range children {
				if c.FinishedAt.After(ended) {
					ended = c.FinishedAt
				}
			}
			if !ended.After(waited) {
				q.violation(s, "child-end-race", "%s still waits for its child (%s), which ended (%v) before the parent's wait was committed (%v)", s.key, s.waiting, ended, waited)
				continue
			}
			q.violation(s, "child-end-lost", "%s still waits for its child (%s), which ended after the parent's wait was committed", s.key, s.waiting)
			continue
		}
		if v.Status.Status == session.StatusQueued && s.status != session.StatusQueued && q.heldByChildren(ctx) {
			// Children count among the owner's active sessions,
			// though none is held by the limit: a queued session
			// promoted when a cancelled parent ended (its children
			// still active) or when its children ended (another
			// parent's promoted meanwhile already made) finds no room.
			// Which comes first is the runtime's race: it waits.
			q.stats["queued behind children"]++
			s.phase, s.status = "queued", session.StatusQueued
			continue
		}
		if v.Status.Status == session.StatusQueued && s.status != session.StatusQueued {
			q.queuedStuck = true
			q.violation(s, "queued-stuck", "%s is still queued, the reference says %s", s.key, s.status)
			continue
		}
		if v.Status.Status == session.StatusFailed && s.status != session.StatusFailed && q.st.recoverErrors.Load() > 0 &&
			v.Status.Error != nil && strings.Contains(*v.Status.Error, "running the session failed") {
			// Given up as a poison session (Options.MaxAttempts:
			// claimed that often without progress) after a claim
			// answered an error and asking the store what it took
			// did too: the claim's sessions then wait for their
			// leases to lapse and are claimed again, an attempt
			// counted, as a replica that died after its claim would,
			// though nothing ran them. With failed writes, which count
			// theirs, that reaches the bound. Not checked further. (A
			// claim that answered an error alone is no excuse: the
			// dispatcher runs what the store says it took.)
			q.stats["given up after a claim and its recovery lost under load"]++
			s.tainted = "given up after a claim and its recovery lost under load"
			continue
		}
		if v.Status.Status != s.status {
			q.violation(s, "end-state", "%s is %s (error %v), the reference says %s", s.key, v.Status.Status, v.Status.Error, s.status)
			continue
		}
		if s.status == session.StatusCompleted && !strings.Contains(string(v.LatestAnswer), "ok") {
			q.violation(s, "answer", "%s completed with the answer %s", s.key, v.LatestAnswer)
		}
		if s.status == session.StatusAwaitingToolResults {
			clients, approvals := q.pending(ctx, s)
			if len(clients) != s.clients || len(approvals) != s.approvals {
				q.violation(s, "pending", "%s waits for %d results and %d decisions, the reference says %d and %d", s.key, len(clients), len(approvals), s.clients, s.approvals)
			}
		}
	}
	if queued > 0 && active < mtMaxActive {
		q.queuedStuck = true
		q.violation(nil, "queued-stuck", "%d sessions queued with %d of %d active", queued, active, mtMaxActive)
	}
}

// heldByChildren reports whether the owner's active sessions fill its
// limit with children among them (see check).
func (q *mtSeq) heldByChildren(ctx context.Context) bool {
	all, _, err := q.st.ListSessions(ctx, &store.ListParams{Owner: q.owner, Limit: 1000})
	if err != nil {
		q.t.Fatal(err)
	}
	active, children := 0, 0
	for _, got := range all {
		switch session.Status(got.Status) {
		case session.StatusPending, session.StatusRunning, session.StatusPaused, session.StatusIdle, session.StatusAwaitingToolResults:
			active++
			if got.ParentID != "" {
				children++
			}
		}
	}
	return children > 0 && active >= mtMaxActive
}

// checkEvents checks that s's event log is a sequence the reference's
// events make: indexes in order, every accepted message logged once,
// nothing of a run after the session ended unless it started again, a
// result per call at most, and the last ending the one its status says.
func (q *mtSeq) checkEvents(ctx context.Context, s *mtSession, v *session.View) {
	events := q.events(ctx, s)
	seen := map[string]int{}
	results := map[string]int{}
	calls := map[string]bool{}
	ended, last := false, ""
	stopped := 0      // the cancels seen
	fence := int64(0) // calls made by requests before this tick are the cancelled runs'
	for i, e := range events {
		if e.Index != int64(i) {
			q.violation(s, "event-log", "%s: event %d has index %d", s.key, i, e.Index)
			return
		}
		var d session.AgentEventData
		if e.Type == session.EventAgent {
			json.Unmarshal(e.Data, &d)
		}
		kind := e.Type + "/" + d.Kind
		switch {
		case e.Type == session.EventAgentCompletion || e.Type == session.EventAgentError:
			if ended {
				q.violation(s, "event-log", "%s: event %d, %s, ends a session that had ended", s.key, i, e.Type)
				return
			}
			ended, last = true, string(e.Data)
			if e.Type == session.EventAgentError {
				last = "failed"
			}
			if strings.Contains(last, `"stopped"`) && stopped < len(s.cancels) {
				fence = s.cancels[stopped][0]
				stopped++
			}
		case e.Type == session.EventAgentStarted:
			ended = false
		case ended && !(d.Kind == session.KindError && d.Origin == "hrns"):
			q.violation(s, "ended-run-commit", "%s: event %d, %s %s, after the session ended and before it started again", s.key, i, kind, e.Data)
			return
		}
		if d.Kind == session.KindPolicy || d.Kind == session.KindToolResult {
			reqs := d.ToolReqs
			if d.ToolReq != nil {
				reqs = append(reqs, *d.ToolReq)
			}
			for _, r := range reqs {
				if m := mtCallTick.FindStringSubmatch(r.ID); m != nil {
					if n, _ := strconv.ParseInt(m[1], 10, 64); n < fence {
						q.violation(s, "cancelled-result", "%s: event %d, %s of call %s made before the cancel at tick %d, was committed after it", s.key, i, d.Kind, r.ID, fence)
						return
					}
				}
			}
		}
		switch d.Kind {
		case session.KindMessage:
			for _, c := range d.MessageContent {
				if g := mtTag.FindStringSubmatch(strings.TrimSpace(fmt.Sprint(c))); g != nil {
					seen[g[1]]++
				}
			}
		case session.KindPolicy:
			for _, r := range d.ToolReqs {
				calls[r.ID] = true
			}
		case session.KindError:
			// A call's error result (the caller's, a subagent's end,
			// an abandoned call's) is its result too.
			if d.ToolReq == nil {
				break
			}
			results[d.ToolReq.ID]++
			if results[d.ToolReq.ID] > 1 {
				q.violation(s, "call-twice", "%s: call %s has a second result, an error (event %d): %s", s.key, d.ToolReq.ID, i, d.Error)
				return
			}
		case session.KindToolResult:
			if !calls[d.ToolReq.ID] {
				q.violation(s, "event-log", "%s: event %d is a result of %s, which no policy_event made", s.key, i, d.ToolReq.ID)
				return
			}
			results[d.ToolReq.ID]++
			if results[d.ToolReq.ID] > 1 {
				q.violation(s, "call-twice", "%s: call %s has a second tool_result (event %d)", s.key, d.ToolReq.ID, i)
				return
			}
		}
	}
	for _, m := range s.msgs {
		if seen[m.tag] != 1 {
			q.violation(s, "event-log", "%s: message %s logged %d times", s.key, m.tag, seen[m.tag])
			return
		}
	}
	if v.Status.Status.Terminal() {
		want := map[session.Status]string{session.StatusCompleted: `"finished"`, session.StatusInterrupted: `"stopped"`, session.StatusFailed: "failed"}[v.Status.Status]
		if !ended || !strings.Contains(last, want) {
			q.violation(s, "event-log", "%s is %s but its log ends with %q (ended %v)", s.key, v.Status.Status, last, ended)
		}
	}
}

// checkDelivery checks the delegate calls of the parent p against its
// children: a child whose end the reference delivered is its call's
// result, once, as it ended (its answer, or an error from the subagent
// saying how it ended); a child the parent still waits for has given
// none; a child cut off by its parent's end gave none after that end.
func (q *mtSeq) checkDelivery(ctx context.Context, p *mtSession) {
	call, results := q.delegates(ctx, p)
	for _, c := range q.sessions {
		if c.parent != p || c.tainted != "" {
			continue
		}
		id, ok := call[c.key]
		if !ok {
			q.violation(p, "child-call", "%s: no delegate call of %s started its child %s", p.key, p.key, c.key)
			return
		}
		r := results[id]
		switch {
		case r != nil && r.n > 1:
			q.violation(p, "child-end-twice", "%s: the end of its child %s (call %s) was given to it %d times", p.key, c.key, id, r.n)
			return
		case c.owed && r != nil:
			q.violation(p, "child-end-early", "%s: call %s has a result (%s %s) while its child %s, the reference says, runs (%s)", p.key, id, r.kind, r.text, c.key, c.status)
			return
		case c.delivered && r == nil:
			q.violation(p, "child-end-lost", "%s: the end of its child %s (%s) never became the result of call %s", p.key, c.key, c.status, id)
			return
		case c.delivered && c.status == session.StatusCompleted && r.kind != session.KindToolResult,
			c.delivered && c.status != session.StatusCompleted && (r.kind != session.KindError || r.origin != "subagent" || !strings.Contains(r.text, string(c.status))):
			q.violation(p, "child-end-wrong", "%s: its child %s ended %s, and call %s got %s from %q: %s", p.key, c.key, c.status, id, r.kind, r.origin, r.text)
			return
		}
	}
}

// mtResult is what a parent's log says of a delegate call's result.
type mtResult struct {
	n      int    // results
	kind   string // the first's
	origin string
	text   string
}

// delegates reads the parent p's delegate calls from its log: the call
// that started each child (by the child's key), and the results of each.
func (q *mtSeq) delegates(ctx context.Context, p *mtSession) (call map[string]string, results map[string]*mtResult) {
	call, results = map[string]string{}, map[string]*mtResult{}
	for _, e := range q.events(ctx, p) {
		var d session.AgentEventData
		if e.Type != session.EventAgent || json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		switch d.Kind {
		case session.KindPolicy:
			for _, r := range d.ToolReqs {
				var in struct{ Task string }
				if r.ToolName != "delegate" || json.Unmarshal(r.Args, &in) != nil {
					continue
				}
				if g := mtTag.FindStringSubmatch(in.Task); g != nil {
					call[g[1][:strings.IndexByte(g[1], '.')]] = r.ID
				}
			}
		case session.KindToolResult, session.KindError:
			if d.ToolReq == nil || d.ToolReq.ToolName != "delegate" {
				continue
			}
			r := results[d.ToolReq.ID]
			if r == nil {
				r = &mtResult{kind: d.Kind, origin: d.Origin, text: d.Error + string(d.Result)}
				results[d.ToolReq.ID] = r
			}
			r.n++
		}
	}
	return call, results
}

// checkRequests checks what reached the model: every message once, in
// order, in the first request that started after it was accepted and in
// every later one; after a force answer, a request without tools.
func (q *mtSeq) checkRequests(s *mtSession) {
	reqs := q.w.requestsOf(s.key)
	order := map[string]int{}
	for i, m := range s.msgs {
		order[m.tag] = i
	}
	for _, r := range reqs {
		seen := map[string]bool{}
		prev := -1
		for _, tag := range r.tags {
			if seen[tag] {
				q.violation(s, "message-twice", "%s: the request at tick %d holds %s twice: %v", s.key, r.start, tag, r.tags)
				return
			}
			seen[tag] = true
			if order[tag] < prev {
				q.violation(s, "message-order", "%s: the request at tick %d holds the messages out of order: %v", s.key, r.start, r.tags)
				return
			}
			prev = order[tag]
		}
	}
	for _, m := range s.msgs {
		in := -1
		for i, r := range reqs {
			if r.start > m.after {
				if !slices.Contains(r.tags, m.tag) {
					q.violation(s, "message-late", "%s: message %s (accepted at tick %d) is not in the next request (tick %d): %v", s.key, m.tag, m.after, r.start, r.tags)
					return
				}
				in = i
				break
			}
		}
		if in < 0 {
			continue
		}
		for _, r := range reqs[in:] {
			if !slices.Contains(r.tags, m.tag) {
				q.violation(s, "message-lost", "%s: message %s is missing from the request at tick %d: %v", s.key, m.tag, r.start, r.tags)
				return
			}
		}
	}
	for _, fa := range s.forces {
		// A force answer asks for the next answer without tools: an
		// answer that was being written when it came is that answer. A
		// request without tools that started while ForceAnswer ran
		// honoured it (its commit wakes the worker before the caller
		// reads the store's reply: on PostgreSQL, often).
		if slices.ContainsFunc(reqs, func(r *mtRequest) bool { return r.start > fa[0] && r.start < fa[1] && r.tools == 0 }) {
			continue
		}
		f := fa[1]
		end := int64(1) << 62
		for _, c := range s.cancels {
			if c[0] > f {
				end = min(end, c[0])
			}
		}
		for _, r := range reqs {
			if r.start < f && r.answered > f {
				end = min(end, r.answered)
			}
		}
		for i, r := range reqs {
			if r.start <= f {
				continue
			}
			if i > 0 && resends(reqs[i-1], r, f) {
				// The step of the request before it was cut (a lease
				// lost under load: the worker's renewals came too
				// late) and this one sends it again: its worker may
				// have read the session before the force answer was
				// committed. The next request is the one that must
				// honour it.
				q.stats["force answer after a cut step"]++
				continue
			}
			if r.start < end && r.tools > 0 {
				q.violation(s, "force-answer", "%s: the first request after the force answer (tick %d) offers %d tools", s.key, f, r.tools)
				return
			}
			break
		}
	}
}

// resends reports whether r sends again the step of p, the request of
// its session before it, which started before the force answer that
// returned at tick f and was cut before r started: the same messages,
// the same results.
func resends(p, r *mtRequest, f int64) bool {
	return p.start < f && p.cut > 0 && p.cut < r.start && slices.Equal(p.tags, r.tags) && maps.Equal(p.results, r.results)
}

// checkRuns checks the server tools' runs: none refused by policy or by
// a decision, none started after a cancel for a call made before it, and
// no result of a call cut by a cancel read as a success after it.
func (q *mtSeq) checkRuns(s *mtSession) {
	runs := q.w.runsOf(s.id)
	for _, r := range runs {
		switch {
		case r.tool == "forbidden":
			q.violation(s, "denied-call-ran", "%s: call %s of forbidden ran (tick %d)", s.key, r.call, r.start)
			return
		case r.tool == "guarded" && !s.approved[r.call]:
			q.violation(s, "unapproved-call-ran", "%s: call %s of guarded ran without approval (tick %d)", s.key, r.call, r.start)
			return
		}
		for _, c := range s.cancels {
			if r.req < c[0] && r.start > c[1] {
				q.violation(s, "call-after-cancel", "%s: call %s (made at tick %d) ran at tick %d, after the session was cancelled at tick %d", s.key, r.call, r.req, r.start, c[1])
				return
			}
		}
	}
	for _, c := range s.cancels {
		for _, r := range runs {
			if r.req < c[0] && (r.end == 0 || r.end > c[0]) {
				for _, req := range q.w.requestsOf(s.key) {
					if isErr, ok := req.results[r.call]; req.start > c[1] && ok && !isErr {
						q.violation(s, "cancelled-result", "%s: call %s, cut by the cancel at tick %d, reached the model as a success at tick %d", s.key, r.call, c[1], req.start)
						return
					}
				}
			}
		}
	}
}

// mtLog keeps the managers' warnings and errors, shown with a finding.
type mtLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *mtLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *mtLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// dump logs what the model saw of s and its events (with -modeltest.seed).
func (q *mtSeq) dump(s *mtSession) {
	q.t.Logf("%s (%s): reference %s/%s", s.key, s.id, s.phase, s.status)
	for _, r := range q.w.requestsOf(s.key) {
		q.t.Logf("  request at tick %d: %v, %d tools, results %v, answered at %d", r.start, r.tags, r.tools, r.results, r.answered)
	}
	for _, r := range q.w.runsOf(s.id) {
		q.t.Logf("  run %+v", r)
	}
	for _, e := range q.events(context.Background(), s) {
		q.t.Logf("  event %d %s %s", e.Index, e.Type, e.Data)
	}
}
