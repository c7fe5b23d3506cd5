package session

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// recentModel is a store's log of sessions, the reference a long-poll
// answered from recentCommits is checked against: what a read of the
// store would answer.
type recentModel struct {
	logs    map[string][]store.Event
	version map[string]int64
	status  map[string]map[int64]string // by session and version
}

// commit appends n events to id's log, of sizes up to maxData, and
// returns the session and events as the store's Committed gives them.
func (m *recentModel) commit(rnd *rand.Rand, id string, n, maxData int) (*store.Session, []store.Event) {
	log := m.logs[id]
	var events []store.Event
	for range n {
		data, _ := json.Marshal(strings.Repeat("x", rnd.IntN(maxData+1)))
		events = append(events, store.Event{Index: int64(len(log)), Type: "AgentEvent", Data: data, Time: time.Unix(int64(len(log)), 0)})
		log = append(log, events[len(events)-1])
	}
	m.logs[id] = log
	m.version[id]++
	v := m.version[id]
	if m.status[id] == nil {
		m.status[id] = map[int64]string{}
	}
	m.status[id][v] = fmt.Sprintf("status-%d", rnd.IntN(1000))
	return &store.Session{ID: id, Owner: "o", Version: v, EventCount: int64(len(log)), Status: m.status[id][v]}, events
}

// TestRecentCommitsRandom: whatever the sequence of commits (this
// process's, recorded, some out of order; another replica's, not
// recorded), a long-poll answered from the records gets the events the
// log has from its cursor, in order, and the status of a committed
// version that has them; a follower that reads the store when the
// records cannot answer gets every event once and in order; the records
// stay within their bounds; and a long-poll a few small commits of this
// process behind is answered from them.
func TestRecentCommitsRandom(t *testing.T) {
	for seed := range uint64(40) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		bound := int64(rnd.IntN(400<<10) + 20<<10)
		r := newRecentCommits(bound)
		m := &recentModel{logs: map[string][]store.Event{}, version: map[string]int64{}, status: map[string]map[int64]string{}}
		ids := []string{"a", "b", "c", "d"}[:1+rnd.IntN(4)]
		cursors := map[string]int64{}
		type late struct {
			s      *store.Session
			events []store.Event
		}
		var held []late // recorded later, out of order
		fromMemory, smallBehind := 0, 0
		// localRun counts, by session, this process's commits since
		// another's or a late record, and their events (small ones).
		localRun := map[string][]int64{}
		for step := range 600 {
			id := ids[rnd.IntN(len(ids))]
			switch op := rnd.IntN(10); {
			case op < 4: // a commit of this process
				maxData := 200
				if rnd.IntN(8) == 0 {
					maxData = 40 << 10
				}
				s, events := m.commit(rnd, id, rnd.IntN(6), maxData)
				if rnd.IntN(10) == 0 {
					held = append(held, late{s, events})
					localRun[id] = nil
					continue
				}
				r.put(s, events, Metrics{})
				if maxData == 200 {
					localRun[id] = append(localRun[id], s.EventCount-int64(len(events)))
				} else {
					localRun[id] = nil
				}
			case op < 5: // another replica's commit
				m.commit(rnd, id, rnd.IntN(4), 200)
				localRun[id] = nil
			case op < 6 && len(held) > 0: // a late record
				i := rnd.IntN(len(held))
				r.put(held[i].s, held[i].events, Metrics{})
				held = append(held[:i], held[i+1:]...)
			default: // a long-poll
				log := m.logs[id]
				from := int64(rnd.IntN(len(log)+3)) - 1
				if rnd.IntN(2) == 0 {
					from = cursors[id] // the follower's
				}
				p := &ChangesParams{From: from, NoEvents: rnd.IntN(6) == 0}
				if rnd.IntN(4) == 0 {
					p.Limit = new(rnd.IntN(5))
				}
				c, count, ok := r.changes("o", id, p)
				if _, _, other := r.changes("mallory", id, p); other {
					t.Fatalf("seed %d step %d: another owner's long-poll was answered", seed, step)
				}
				start := max(from, 0)
				if run := localRun[id]; len(run) >= 3 && start >= run[len(run)-3] && start < int64(len(log)) && !p.NoEvents {
					// Three small commits of this process behind: the
					// record has them (three commits of at most 5
					// events of 200 bytes are within the bounds).
					smallBehind++
					if !ok {
						t.Fatalf("seed %d step %d: a long-poll from %d, three small commits behind (%v), read the store", seed, step, from, run[len(run)-3:])
					}
				}
				if !ok {
					if from == cursors[id] {
						cursors[id] = int64(len(log)) // read from the store
					}
					continue
				}
				fromMemory++
				if count <= start || count > int64(len(log)) {
					t.Fatalf("seed %d step %d: count %d from %d, log of %d", seed, step, count, from, len(log))
				}
				var v int64
				for ver, st := range m.status[id] {
					if st == string(c.Status) && ver > v {
						v = ver
					}
				}
				if v == 0 {
					t.Fatalf("seed %d step %d: status %q is no committed version's", seed, step, c.Status)
				}
				want := log[start:count]
				if p.NoEvents {
					want = nil
				} else if p.Limit != nil && *p.Limit < len(want) {
					want = want[:*p.Limit]
				}
				if len(c.NewEvents) != len(want) {
					t.Fatalf("seed %d step %d: %d events from %d, want %d", seed, step, len(c.NewEvents), from, len(want))
				}
				for i, e := range c.NewEvents {
					w := want[i]
					if e.Index != start+int64(i) || e.Index != w.Index || string(e.Data) != string(w.Data) || !e.Timestamp.Equal(w.Time) {
						t.Fatalf("seed %d step %d: event %d from %d is %d (%d bytes), want %d (%d bytes)", seed, step, i, from, e.Index, len(e.Data), w.Index, len(w.Data))
					}
				}
				if from == cursors[id] && !p.NoEvents {
					cursors[id] = start + int64(len(c.NewEvents)) // once each, in order
				}
			}
			checkRecentBounds(t, r, bound)
			r.lru.mu.Lock()
			for _, id := range ids {
				if _, kept := r.lru.entries[id]; !kept {
					localRun[id] = nil // evicted for others
				}
			}
			r.lru.mu.Unlock()
		}
		if fromMemory == 0 || smallBehind == 0 {
			t.Errorf("seed %d: %d long-polls answered from the records, %d a few commits behind: the test tests nothing", seed, fromMemory, smallBehind)
		}
	}
}

// checkRecentBounds checks that every record keeps the log contiguous and
// within the bounds per session, and the records together within bound.
func checkRecentBounds(t *testing.T, r *recentCommits, bound int64) {
	t.Helper()
	r.lru.mu.Lock()
	defer r.lru.mu.Unlock()
	if r.lru.size > bound {
		t.Fatalf("the records hold %d bytes, bound %d", r.lru.size, bound)
	}
	for e := r.lru.order.Front(); e != nil; e = e.Next() {
		rec := e.Value.(*lruEntry[commitRecord]).val
		if rec.first+int64(len(rec.events)) != rec.s.EventCount {
			t.Fatalf("record of %s: events from %d, %d of them, count %d", rec.s.ID, rec.first, len(rec.events), rec.s.EventCount)
		}
		for i, ev := range rec.events {
			if ev.Index != rec.first+int64(i) {
				t.Fatalf("record of %s: event %d is %d", rec.s.ID, rec.first+int64(i), ev.Index)
			}
		}
		// The test's commits have at most 5 events of at most 40 KiB:
		// the last commit, kept whole, is within both bounds.
		var b int64
		for i := range rec.events {
			b += eventSize(&rec.events[i])
		}
		if n := len(rec.events); n > recentEventsPerSession || b > recentEventBytesPerSession+5*(40<<10+80) {
			t.Fatalf("record of %s holds %d events, %d bytes", rec.s.ID, n, b)
		}
	}
}

// TestWaitersCount: the long-polls counted for a session are counted off
// when they end, the last one's end forgetting the session.
func TestWaitersCount(t *testing.T) {
	var w waiters
	if w.any("a") {
		t.Fatal("a counted before any long-poll")
	}
	w.add("a")
	w.add("a")
	w.add("b")
	w.done("a")
	if !w.any("a") || !w.any("b") {
		t.Fatal("a or b not counted while a long-poll of each waits")
	}
	w.done("a")
	w.done("b")
	if w.any("a") || w.any("b") || len(w.n) != 0 {
		t.Fatalf("after their long-polls ended: %v", w.n)
	}
}
