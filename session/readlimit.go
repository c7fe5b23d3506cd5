package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hrns-dev/hrns/store"
)

// MaxReadBytes is the default bound on the events one read loads
// (Options.MaxReadBytes): a page of [Manager.Events], the events of a
// [Manager.Changes], one turn of the server's event stream. A read stops
// after the event that reaches it (the first event is always given, and
// one event is bounded by what one request may post), and says where to
// go on: [Page.NextIndex], or the cursor of the changes (the events
// returned). Without it, one request for a page of 200 large events
// loaded them all at once.
const MaxReadBytes = 4 << 20

// MaxReadsPerOwner is the default bound on the event reads of one owner
// (one API key) loading at once (Options.MaxReadsPerOwner): with
// [MaxReadBytes], what one key's reads make the server hold at once is
// bounded. Reads through a share link count for the session's owner,
// apart from the owner's own.
const MaxReadsPerOwner = 4

// ErrReadBusy: the owner already has Options.MaxReadsPerOwner event
// reads loading; nothing was read. The server answers 429 with
// Retry-After.
var ErrReadBusy = errors.New("too many event reads at once")

// readSlots counts the event reads loading for each owner.
type readSlots struct {
	mu   sync.Mutex
	busy map[string]int
}

// acquire takes one of owner's read slots, or fails with [ErrReadBusy]
// when all of them are taken. The caller calls the release it returns.
func (m *Manager) acquireRead(owner string) (release func(), err error) {
	limit := m.opts.MaxReadsPerOwner
	if limit <= 0 {
		limit = MaxReadsPerOwner
	}
	r := &m.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy == nil {
		r.busy = map[string]int{}
	}
	if r.busy[owner] >= limit {
		return nil, fmt.Errorf("%w: this key already has %d reads of events loading (at most %d): retry in a moment", ErrReadBusy, r.busy[owner], limit)
	}
	r.busy[owner]++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.busy[owner]--; r.busy[owner] <= 0 {
			delete(r.busy, owner)
		}
	}, nil
}

// readBudget is the bound on the bytes of events one read loads.
func (m *Manager) readBudget() int64 {
	if m.opts.MaxReadBytes > 0 {
		return int64(m.opts.MaxReadBytes)
	}
	return MaxReadBytes
}

// eventsAt reads the events of id at the indexes idx, in that order,
// stopping after the event that brings their data to the read budget.
// Ascending consecutive indexes are read at once; others one by one.
func (m *Manager) eventsAt(ctx context.Context, id string, idx []int64) ([]store.Event, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	budget := m.readBudget()
	if idx[len(idx)-1]-idx[0] == int64(len(idx)-1) {
		return m.st.EventsWithin(ctx, id, idx[0], len(idx), budget)
	}
	if idx[0]-idx[len(idx)-1] == int64(len(idx)-1) {
		// Newest first: read the range at once if it fits the budget,
		// else one by one from the newest.
		events, err := m.st.EventsWithin(ctx, id, idx[len(idx)-1], len(idx), budget)
		if err != nil || len(events) == len(idx) {
			slices.Reverse(events)
			return events, err
		}
	}
	var out []store.Event
	var read int64
	for _, i := range idx {
		e, err := m.st.EventsWithin(ctx, id, i, 1, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, e...)
		for _, e := range e {
			read += int64(len(e.Data))
		}
		if read >= budget {
			break
		}
	}
	return out, nil
}

// withinBudget cuts the events of c, answered from memory (see
// recentCommits), where a read of them would have stopped, so that the
// answer is the one a read gives.
func (m *Manager) withinBudget(c *Changes) *Changes {
	budget, read := m.readBudget(), int64(0)
	for i, e := range c.NewEvents {
		if read += int64(len(e.Data)); read >= budget {
			c.NewEvents = c.NewEvents[:i+1]
			break
		}
	}
	return c
}
