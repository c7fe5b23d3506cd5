package session

import (
	"sync"

	"github.com/hrns-dev/hrns/store"
)

// recentCommitsBytes bounds what a manager keeps of its last commits.
const recentCommitsBytes = 8 << 20

// A commitRecord is a session as this process last committed it, with the
// events of that commit: what the long-polls the commit wakes need
// (see [Manager.Changes]).
type commitRecord struct {
	s       store.Session // as stored; its documents are shared, never modified
	first   int64         // the index of events[0]
	events  []store.Event // as stored
	metrics Metrics       // of the committed state
}

// recentCommits keeps the commit records of the sessions this process
// committed last, so that a long-poll woken by a commit is answered from
// what the commit wrote instead of reading the session and its events
// back. A record is always a committed version of the session, though
// not necessarily the latest (another replica may have committed since):
// a long-poll answered from it sees the session as of its last event, as
// from a read made a moment earlier. Least recently used out.
type recentCommits struct {
	lru[commitRecord]
}

func newRecentCommits(max int64) *recentCommits {
	return &recentCommits{newLRU[commitRecord](max)}
}

// put records a commit of s with events (as [store.UpdateOptions.Committed]
// gives them); events is copied, their data shared.
func (r *recentCommits) put(s *store.Session, events []store.Event, met Metrics) {
	size := sessionSize(s)
	for _, e := range events {
		size += int64(len(e.Data)+len(e.Type)) + 64
	}
	r.lru.put(s.ID, commitRecord{s: *s, first: s.EventCount - int64(len(events)), events: append([]store.Event(nil), events...), metrics: met}, size)
}

// changes answers a long-poll of owner's session id from cursor from, if
// the session's last commit here has the events from there on: ok
// reports whether it did.
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
