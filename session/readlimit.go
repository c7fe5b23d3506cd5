package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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

// MaxReadWait is the default of how long an event read waits for one of
// its owner's read slots before it fails with [ErrReadBusy]
// (Options.MaxReadWait). A read loads for milliseconds, so a client that
// follows many sessions of one key at once (a long-poll each) queues for
// a slot rather than getting 429s, while what the key makes the server
// hold stays bounded by the slots.
const MaxReadWait = 2 * time.Second

// readSlots counts the event reads loading for each owner; freed tells
// the reads waiting for one of an owner's slots that one was given back.
type readSlots struct {
	mu    sync.Mutex
	busy  map[string]int
	freed map[string]chan struct{}
}

// acquireRead takes one of owner's read slots, waiting for one at most
// Options.MaxReadWait (and while ctx lasts), or fails with [ErrReadBusy].
// The caller calls the release it returns.
func (m *Manager) acquireRead(ctx context.Context, owner string) (release func(), err error) {
	limit := m.opts.MaxReadsPerOwner
	if limit <= 0 {
		limit = MaxReadsPerOwner
	}
	wait := m.opts.MaxReadWait
	if wait == 0 {
		wait = MaxReadWait
	}
	timeout := closedTime // a negative wait: none
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	r := &m.reads
	for {
		r.mu.Lock()
		if r.busy == nil {
			r.busy, r.freed = map[string]int{}, map[string]chan struct{}{}
		}
		if n := r.busy[owner]; n < limit {
			r.busy[owner] = n + 1
			r.mu.Unlock()
			return func() { r.give(owner) }, nil
		}
		freed := r.freed[owner]
		if freed == nil {
			freed = make(chan struct{})
			r.freed[owner] = freed
		}
		n := r.busy[owner]
		r.mu.Unlock()
		select {
		case <-freed:
		case <-timeout:
			return nil, fmt.Errorf("%w: this key already has %d reads of events loading (at most %d): retry in a moment", ErrReadBusy, n, limit)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// closedTime is a channel that is always ready: no wait.
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// give hands one of owner's slots back and wakes the reads waiting for
// one (each tries again; those that find none wait for the next).
func (r *readSlots) give(owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy[owner]--; r.busy[owner] <= 0 {
		delete(r.busy, owner)
	}
	if c := r.freed[owner]; c != nil {
		close(c)
		delete(r.freed, owner)
	}
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
