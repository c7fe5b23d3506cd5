package session

import (
	"sync"

	"github.com/hrns-dev/hrns/store"
)

// recentCommitsBytes bounds what a manager keeps of its last commits.
const recentCommitsBytes = 8 << 20

// A session's record keeps the events of its last commits within these
// bounds, besides those of its last commit, which it keeps whole: enough
// for a long-poll that fell a few commits behind (its client was posting
// results, or running a tool, while the session went on) to be answered
// without a read.
const (
	recentEventsPerSession     = 32
	recentEventBytesPerSession = 16 << 10
)

// A commitRecord is a session as this process last committed it, with the
// events of its last commits: what the long-polls the commits wake need
// (see [Manager.Changes]).
type commitRecord struct {
	s       store.Session // as stored; its documents are shared, never modified
	first   int64         // the index of events[0]
	events  []store.Event // as stored, the log from first to s.EventCount; never modified
	metrics Metrics       // of the committed state
}

// recentCommits keeps the commit records of the sessions this process
// committed last, so that a long-poll woken by a commit is answered from
// what the commits wrote instead of reading the session and its events
// back. A record is always a committed version of the session, though
// not necessarily the latest (another replica may have committed since):
// a long-poll answered from it sees the session as of its last event, as
// from a read made a moment earlier. Its events are the log's from first
// on, contiguous: a commit whose events do not follow the record's (some
// were committed elsewhere between) starts the record again from its own.
// Least recently used out.
type recentCommits struct {
	mu sync.Mutex // serialises put's read and write of a record
	lru[commitRecord]
}

func newRecentCommits(max int64) *recentCommits {
	return &recentCommits{lru: newLRU[commitRecord](max)}
}

// put records a commit of s with events (as [store.UpdateOptions.Committed]
// gives them); events is copied, their data shared. The events the record
// kept of the session's earlier commits stay when these follow them,
// within the bounds above. A commit older than the one recorded (two of
// this process's commits recorded out of order) changes nothing.
func (r *recentCommits) put(s *store.Session, events []store.Event, met Metrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := s.EventCount - int64(len(events))
	var kept []store.Event
	if old, _, ok := r.lru.get(s.ID); ok && old.s.Owner == s.Owner {
		if old.s.Version >= s.Version {
			return
		}
		if old.s.EventCount == first {
			kept = old.events
		}
	}
	var keptBytes int64
	from := len(kept)
	for from > 0 && len(kept)-from < recentEventsPerSession-len(events) {
		b := eventSize(&kept[from-1])
		if keptBytes+b > recentEventBytesPerSession {
			break
		}
		keptBytes += b
		from--
	}
	rec := commitRecord{s: *s, first: first - int64(len(kept)-from), metrics: met}
	rec.events = make([]store.Event, 0, len(kept)-from+len(events))
	rec.events = append(append(rec.events, kept[from:]...), events...)
	size := sessionSize(s)
	for i := range rec.events {
		size += eventSize(&rec.events[i])
	}
	r.lru.put(s.ID, rec, size)
}

// eventSize is what a record holding e is counted for it.
func eventSize(e *store.Event) int64 {
	return int64(len(e.Data)+len(e.Type)) + 64
}

// changes answers a long-poll of owner's session id from cursor from, if
// the session's record here has the events from there on: ok reports
// whether it did.
func (r *recentCommits) changes(owner, id string, p *ChangesParams) (c *Changes, count int64, ok bool) {
	rec, _, found := r.lru.get(id)
	from := max(p.From, 0)
	if !found || rec.s.Owner != owner || rec.s.EventCount <= from || from < rec.first {
		return nil, 0, false
	}
	c = statusChanges(&rec.s, rec.metrics)
	if !p.NoEvents {
		events := rec.events[from-rec.first:]
		if p.Limit != nil && *p.Limit < len(events) {
			events = events[:max(*p.Limit, 0)]
		}
		c.NewEvents = apiEvents(events)
	}
	return c, rec.s.EventCount, true
}

// inflightCommits counts, by session, the commits this process has in flight
// (between the call of store.UpdateSession and its return). A store may
// announce a commit before it returns, and before the commit's record is
// kept here: PostgreSQL's notification comes back over the listening
// connection while the committing statement's answer is still on its
// way. A long-poll woken then waits for the commit in flight instead of
// reading the session back (see Manager.Changes).
type inflightCommits struct {
	mu sync.Mutex
	m  map[string]*inflightCommit
}

type inflightCommit struct {
	n    int
	done chan struct{} // closed when n falls to 0
}

// begin records a commit of id in flight; call the function it returns
// when the commit has returned.
func (f *inflightCommits) begin(id string) (end func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*inflightCommit{}
	}
	fl := f.m[id]
	if fl == nil {
		fl = &inflightCommit{done: make(chan struct{})}
		f.m[id] = fl
	}
	fl.n++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if fl.n--; fl.n == 0 {
			close(fl.done)
			delete(f.m, id)
		}
	}
}

// wait returns a channel closed once the commits of id now in flight have
// returned, or nil when there are none.
func (f *inflightCommits) wait(id string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.m[id]; fl != nil {
		return fl.done
	}
	return nil
}

// waiters counts, by session, the long-polls of this process that may
// wait on it.
type waiters struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts a long-poll of id; it calls done(id) when it ends.
func (w *waiters) add(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[id]++
}

// done counts off a long-poll of id that add counted.
func (w *waiters) done(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[id]--; w.n[id] <= 0 {
		delete(w.n, id)
	}
}

// any reports whether a long-poll of id is counted.
func (w *waiters) any(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[id] > 0
}
