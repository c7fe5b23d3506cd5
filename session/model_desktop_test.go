package session_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// The seams of the model-based test (model_test.go) that came with the
// user's desktop and the dispatcher's stops, run by TestModelBasedDesktop:
//
//   - sessions whose agent has a desktop on the user's device: the model
//     calls its computer tool (directives computer and computer2), the
//     session waits in awaiting_tool_results, and the test answers each
//     call with a result carrying a screenshot (a 1×1 PNG whose colour is
//     its number), an invalid image (refused, nothing recorded), or an
//     error; a result is sometimes posted twice, as a client retries;
//   - stops of the manager that land inside a claim of the dispatcher or
//     a worker's update (before or after its write), held there by the
//     store until the stop is under way, and stops right after an action,
//     wherever the runtime is.
//
// Invariants, after every step, beside model_test.go's: every accepted
// image reaches the model in its call's result and nowhere else, once a
// request (and in the first request after the wait it ended); a refused
// post changes neither the log nor the session; the log keeps each
// accepted result without its image, followed at once by one
// observation_event of type desktop carrying it, and nothing else.
//
//	go test -run TestModelBasedDesktop ./session/ -modeltest.duration=1m
//	go test -run TestModelBasedDesktop ./session/ -modeltest.seed=N -v

// mtDesk is the reference's part of a session with the user's desktop.
type mtDesk struct {
	accepted map[string]int64 // the image accepted for a call, by call id
	at       map[string]int64 // the tick after its post returned
	// must are the calls whose wait their post ended (not paused): the
	// first request after it carries their image.
	must    map[string]bool
	errored map[string]bool // calls answered with an error
	refused int             // posts refused
}

func newDesk() *mtDesk {
	return &mtDesk{accepted: map[string]int64{}, at: map[string]int64{}, must: map[string]bool{}, errored: map[string]bool{}}
}

// mtScreenshot makes c a call of the computer tool that takes a
// screenshot (its id, which names the request that made it, is kept).
func mtScreenshot(c llm.ToolCall) llm.ToolCall {
	c.Arguments = llm.Arguments(`{"action":"screenshot"}`)
	return c
}

// mtPNG is image number n: a PNG of w×h pixels whose colour is n.
func mtPNG(n int64, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	c := color.NRGBA{R: uint8(n >> 16), G: uint8(n >> 8), B: uint8(n), A: 255}
	for x := range w {
		for y := range h {
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// mtImageIDs are the numbers of the images in a tool result (-1 for one
// that is not an image of mtPNG).
func mtImageIDs(r *llm.ToolResult) []int64 {
	var out []int64
	for _, p := range r.Content {
		if p.Kind != llm.PartImage || p.Media == nil {
			continue
		}
		out = append(out, mtImageID(p.Media.Data))
	}
	return out
}

func mtImageID(data []byte) int64 {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return -1
	}
	c := color.NRGBAModel.Convert(img.At(0, 0)).(color.NRGBA)
	return int64(c.R)<<16 | int64(c.G)<<8 | int64(c.B)
}

// goodImage is a result carrying image n, in one of the shapes a caller
// may post.
func (q *mtSeq) goodImage(n int64) json.RawMessage {
	b64 := base64.StdEncoding.EncodeToString(mtPNG(n, 1, 1))
	img := map[string]any{"type": "base64", "source": b64, "media_type": "image/png"}
	if q.rng.IntN(3) == 0 {
		delete(img, "media_type") // the bytes say it
	}
	res := map[string]any{"image": img, "text": fmt.Sprintf("screenshot %d", n)}
	if q.rng.IntN(3) == 0 {
		res["cursor"] = []int{3, 4} // more than text: the model reads it as JSON
	}
	out, _ := json.Marshal(res)
	return out
}

// badImage is a result carrying an image the session must refuse.
func (q *mtSeq) badImage() (json.RawMessage, string) {
	good := base64.StdEncoding.EncodeToString(mtPNG(0xbad, 1, 1))
	bads := []struct {
		why string
		img any
	}{
		{"not base64", map[string]any{"type": "base64", "media_type": "image/png", "source": "!!not base64!!"}},
		{"not an image", map[string]any{"type": "base64", "source": base64.StdEncoding.EncodeToString([]byte("plain text, not a picture"))}},
		{"bytes of another type", map[string]any{"type": "base64", "media_type": "image/gif", "source": good}},
		{"a type that is not an image", map[string]any{"type": "base64", "media_type": "image/bmp", "source": good}},
		{"by url", map[string]any{"type": "url", "source": "http://127.0.0.1/x.png"}},
		{"an unknown field", map[string]any{"type": "base64", "source": good, "alt": "x"}},
		{"too wide", map[string]any{"type": "base64", "media_type": "image/png", "source": base64.StdEncoding.EncodeToString(mtPNG(0xbad, 8001, 1))}},
		{"a cut PNG", map[string]any{"type": "base64", "media_type": "image/png", "source": base64.StdEncoding.EncodeToString(mtPNG(0xbad, 1, 1)[:20])}},
		{"not an object", "a string"},
	}
	b := bads[q.rng.IntN(len(bads))]
	out, _ := json.Marshal(map[string]any{"text": "screenshot", "image": b.img})
	return out, b.why
}

// postImage answers the computer call c of s (clients are the calls s
// waits for): with a screenshot, an invalid image (refused: nothing
// changes), or an error (the person refused the action).
func (q *mtSeq) postImage(ctx context.Context, s *mtSession, c session.ToolRequest, clients []session.ToolRequest) {
	switch n := q.rng.IntN(8); {
	case n < 3:
		q.postBadImage(ctx, s, c, clients)
		return
	case n == 3:
		err := q.m.PostToolResults(ctx, q.owner, s.id, []session.ToolResult{{Kind: session.KindError, ToolReq: c, Error: "the person refused", Origin: "user_desktop"}})
		q.logf("computer error %s %s: %v", s.key, c.ID, err)
		if err != nil {
			q.t.Fatalf("seed %d: PostToolResults: %v", q.seed, err)
		}
		s.desk.errored[c.ID] = true
		q.stats["computer errors"]++
	default:
		q.images++
		id := q.images
		res := session.ToolResult{Kind: session.KindToolResult, ToolReq: c, Result: q.goodImage(id)}
		err := q.m.PostToolResults(ctx, q.owner, s.id, []session.ToolResult{res})
		after := q.w.clock.tick()
		q.logf("image %d %s %s: %v", id, s.key, c.ID, err)
		if err != nil {
			q.t.Fatalf("seed %d: PostToolResults with an image: %v", q.seed, err)
		}
		s.desk.accepted[c.ID], s.desk.at[c.ID] = id, after
		q.stats["images accepted"]++
		if q.rng.IntN(4) == 0 {
			// The client did not hear the reply and posts it again:
			// nothing new is recorded (checkDesktop counts).
			err := q.m.PostToolResults(ctx, q.owner, s.id, []session.ToolResult{res})
			q.logf("image %d again %s %s: %v", id, s.key, c.ID, err)
			// (Or ErrFinished: the run it resumed may have ended.)
			if err != nil && !errors.Is(err, session.ErrFinished) {
				q.violation(s, "image-retry", "%s: posting the result of %s again: %v, want nil (it is recorded once)", s.key, c.ID, err)
			}
			q.stats["images posted twice"]++
		}
	}
	s.clients--
	if s.clients == 0 && !s.paused {
		// The calls of this wait are the request's that made c.
		made := c.ID[:strings.LastIndexByte(c.ID, '.')]
		for id := range s.desk.accepted {
			if strings.HasPrefix(id, made+".") {
				s.desk.must[id] = true
			}
		}
	}
	q.settleCalls(s)
}

// postBadImage posts an invalid image for c (with a good one for another
// call of the same wait, sometimes, in the same post): the post is
// refused as a whole, and the log and the session stay as they were.
func (q *mtSeq) postBadImage(ctx context.Context, s *mtSession, c session.ToolRequest, clients []session.ToolRequest) {
	bad, why := q.badImage()
	results := []session.ToolResult{{Kind: session.KindToolResult, ToolReq: c, Result: bad}}
	for _, o := range clients {
		if o.ID != c.ID && q.rng.IntN(2) == 0 {
			results = append([]session.ToolResult{{Kind: session.KindToolResult, ToolReq: o, Result: q.goodImage(0xbad)}}, results...)
			break
		}
	}
	before, _ := q.m.Get(ctx, q.owner, s.id)
	events := q.events(ctx, s)
	err := q.m.PostToolResults(ctx, q.owner, s.id, results)
	q.logf("bad image (%s) %s %s, %d results: %v", why, s.key, c.ID, len(results), err)
	s.desk.refused++
	q.stats["images refused"]++
	if _, ok := errors.AsType[*session.ValidationError](err); !ok {
		q.violation(s, "bad-image-accepted", "%s: an image that is %s: %v, want a validation error", s.key, why, err)
		return
	}
	after, _ := q.m.Get(ctx, q.owner, s.id)
	if now := q.events(ctx, s); len(now) != len(events) {
		q.violation(s, "refused-post-recorded", "%s: a refused post (%s) added %d events: %s", s.key, why, len(now)-len(events), now[len(now)-1].Data)
		return
	}
	if before.Status.Status != after.Status.Status {
		q.violation(s, "refused-post-recorded", "%s: a refused post (%s) moved the session from %s to %s", s.key, why, before.Status.Status, after.Status.Status)
	}
	if cl, _ := q.pending(ctx, s); len(cl) != len(clients) {
		q.violation(s, "refused-post-recorded", "%s: after a refused post the session waits for %d results, not %d", s.key, len(cl), len(clients))
	}
}

// checkDesktop checks what the model saw of s's images, and its log.
func (q *mtSeq) checkDesktop(ctx context.Context, s *mtSession) {
	d := s.desk
	reqs := q.w.requestsOf(s.key)
	for _, r := range reqs {
		for call, ids := range r.images {
			want, ok := d.accepted[call]
			switch {
			case !ok && len(ids) > 0:
				q.violation(s, "image-wrong-call", "%s: the request at tick %d carries images %v in the result of %s, which none was accepted for", s.key, r.start, ids, call)
				return
			case ok && (len(ids) != 1 || ids[0] != want):
				q.violation(s, "image-once", "%s: the request at tick %d carries images %v in the result of %s, want [%d]", s.key, r.start, ids, call, want)
				return
			}
		}
	}
	for call := range d.must {
		for _, r := range reqs {
			if r.start > d.at[call] {
				if _, ok := r.results[call]; !ok || len(r.images[call]) != 1 {
					q.violation(s, "image-late", "%s: the first request after image %d was accepted for %s (tick %d) carries %v", s.key, d.accepted[call], call, r.start, r.images[call])
					return
				}
				break
			}
		}
	}
	results, observed := map[string]int{}, map[string]int{}
	events := q.events(ctx, s)
	for i, e := range events {
		if e.Type != session.EventAgent {
			continue
		}
		var a session.AgentEventData
		if err := json.Unmarshal(e.Data, &a); err != nil {
			q.t.Fatal(err)
		}
		switch a.Kind {
		case session.KindToolResult:
			if a.ToolReq == nil || a.ToolReq.ToolName != session.ComputerTool {
				continue
			}
			results[a.ToolReq.ID]++
			if strings.Contains(string(a.Result), `"image"`) || strings.Contains(string(a.Result), "iVBOR") {
				q.violation(s, "image-in-log", "%s: event %d, the result of %s, keeps its image: %.200s", s.key, i, a.ToolReq.ID, a.Result)
				return
			}
			if _, ok := d.accepted[a.ToolReq.ID]; !ok {
				q.violation(s, "image-wrong-call", "%s: event %d is a result of %s, which the test never answered with an image", s.key, i, a.ToolReq.ID)
				return
			}
		case session.KindObservation:
			call := ""
			if a.ToolReq != nil {
				call = a.ToolReq.ID
			}
			observed[call]++
			want, ok := d.accepted[call]
			switch {
			case !ok:
				q.violation(s, "observation", "%s: event %d, an observation of %q, which no accepted image was posted for", s.key, i, call)
				return
			case a.ObservationType != "desktop":
				q.violation(s, "observation", "%s: event %d, the observation of %s, has type %q, want desktop", s.key, i, call, a.ObservationType)
				return
			case observed[call] > 1:
				q.violation(s, "observation-twice", "%s: event %d is a second observation of %s", s.key, i, call)
				return
			case i == 0 || !mtIsResultOf(events[i-1], call):
				q.violation(s, "observation-order", "%s: event %d, the observation of %s, does not follow its result", s.key, i, call)
				return
			}
			data, err := base64.StdEncoding.DecodeString(a.Image.Source)
			if got := mtImageID(data); err != nil || got != want {
				q.violation(s, "observation", "%s: event %d, the observation of %s, carries image %d, want %d", s.key, i, call, got, want)
				return
			}
		}
	}
	for call, id := range d.accepted {
		if results[call] != 1 || observed[call] != 1 {
			q.violation(s, "image-logged", "%s: image %d of %s is logged in %d results and %d observations, want 1 and 1", s.key, id, call, results[call], observed[call])
			return
		}
	}
}

// mtIsResultOf reports whether e is the tool_result of call.
func mtIsResultOf(e session.Event, call string) bool {
	var a session.AgentEventData
	return e.Type == session.EventAgent && json.Unmarshal(e.Data, &a) == nil && a.Kind == session.KindToolResult && a.ToolReq != nil && a.ToolReq.ID == call
}

// mtPause holds one claim of the dispatcher, or one worker's update
// before or after its write, until the test has stopped the manager.
type mtPause struct {
	at      string        // "claim", "update-before" or "update-after"
	reached chan struct{} // closed when held
	proceed chan struct{} // closed to go on
	taken   atomic.Bool   // by the store's caller, or by the test giving up
}

// pauseAt holds the caller at the point at if a pause is armed for it.
func (s *failingStore) pauseAt(at string) {
	p := s.pause.Load()
	if p == nil || p.at != at || !p.taken.CompareAndSwap(false, true) {
		return
	}
	s.pause.CompareAndSwap(p, nil)
	close(p.reached)
	select {
	case <-p.proceed:
	case <-time.After(30 * time.Second):
	}
}

// Claim holds a claim after it committed, when a pause is armed for it.
func (s *failingStore) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	out, err := s.Store.Claim(ctx, p)
	if err != nil {
		s.claimErrors.Add(1)
	}
	if len(out) > 0 {
		s.pauseAt("claim")
	}
	return out, err
}

// RecoverClaim counts the recoveries that answered an error.
func (s *failingStore) RecoverClaim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	out, err := s.Store.RecoverClaim(ctx, p)
	if err != nil {
		s.recoverErrors.Add(1)
	}
	return out, err
}

// armPause arms a pause for the action to come, sometimes.
func (q *mtSeq) armPause() *mtPause {
	if q.rng.IntN(4) != 0 {
		return nil
	}
	ats := []string{"claim", "claim", "update-before", "update-after"}
	p := &mtPause{at: ats[q.rng.IntN(len(ats))], reached: make(chan struct{}), proceed: make(chan struct{})}
	q.st.pause.Store(p)
	return p
}

// stopAtOnce follows an action: when the action's work reached the
// pause armed for it, the manager is stopped there (a claim committed
// but not yet run, or a step's commit under way), and a new one started;
// otherwise, sometimes, the manager is stopped at once, wherever its
// workers are.
//
// Not after a slow step (actions from mark on): model_test.go's
// prediction of it is that the step released goes on as it began, which
// a stop before its commit changes (the request sent again reads the
// messages that came meanwhile).
func (q *mtSeq) stopAtOnce(p *mtPause, mark int) {
	if slices.ContainsFunc(q.actions[mark:], func(a string) bool { return strings.HasPrefix(a, "release ") }) {
		return
	}
	if p != nil {
		select {
		case <-p.reached:
		case <-time.After(100 * time.Millisecond): // not a threshold: a pause not reached is only counted
			q.st.pause.CompareAndSwap(p, nil)
			if p.taken.CompareAndSwap(false, true) {
				q.stats["pauses not reached"]++
				p = nil
				break
			}
			<-p.reached // taken as it was disarmed
		}
	}
	if p != nil {
		q.logf("stop inside %s", p.at)
		q.stats["stops inside "+p.at]++
		// Stop with a context already done cancels the workers and
		// returns: the stop is under way while the claim or the
		// update is held.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		q.m.Stop(done)
		close(p.proceed)
		q.stop()
		q.newManager()
		return
	}
	if q.rng.IntN(6) == 0 {
		q.logf("stop at once")
		q.stats["stops at once"]++
		q.stop()
		q.newManager()
	}
}

// TestModelBasedDesktop runs model_test.go's sequences with the seams of
// this file on each store: the regression seeds, then random ones for
// the duration (-modeltest.duration, as TestModelBased).
func TestModelBasedDesktop(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		stats := map[string]int{}
		run := func(seed uint64) bool {
			q := &mtSeq{t: t, seed: seed, base: st, stats: stats, verbose: *mtSeed != 0, desktop: true}
			q.run()
			stats["sequences"]++
			return !t.Failed()
		}
		if *mtSeed != 0 {
			run(*mtSeed)
			t.Logf("seed %d: %v", *mtSeed, stats)
			return
		}
		for _, seed := range mtDesktopSeeds {
			if !run(seed) {
				return
			}
		}
		deadline := time.Now().Add(mtBudget())
		for time.Now().Before(deadline) {
			if !run(rand.Uint64N(1 << 40)) {
				return
			}
		}
		t.Logf("model-based test with the user's desktop: %v", stats)
	})
}

// mtDesktopSeeds are the seeds TestModelBasedDesktop replays first.
var mtDesktopSeeds = []uint64{2, 814555406326, 318041691000}
