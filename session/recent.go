package session

import (
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
	s := &rec.s
	c = &Changes{
		Status:     Status(s.Status),
		StartedAt:  timePtr(s.StartedAt),
		FinishedAt: timePtr(s.FinishedAt),
		Error:      strPtr(s.Error),
		ErrorCode:  strPtr(s.ErrorCode),
		NewEvents:  []Event{},
		Answer:     s.Answer,
		Metrics:    rec.metrics,
	}
	if !p.NoEvents {
		events := rec.events[from-rec.first:]
		if p.Limit != nil && *p.Limit < len(events) {
			events = events[:max(*p.Limit, 0)]
		}
		c.NewEvents = apiEvents(events)
	}
	return c, s.EventCount, true
}
