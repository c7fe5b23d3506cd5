package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/internal/fairshare"
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

// MaxReads is the default bound on the event reads loading at once in
// the process, all owners together (Options.MaxReads): with
// [MaxReadBytes], what reads make the server hold is bounded whatever
// the number of keys. A freed slot goes to the waiting owner with the
// fewest reads loading (the one that waited longest among equals), so
// that an owner with many reads queued delays another's by one read at
// most.
const MaxReads = 16

// MaxReadQueue is the default bound on the event reads of one owner
// waiting for a slot (Options.MaxReadQueue): one more fails at once
// with [ErrReadBusy]. A client following hundreds of sessions of one
// key queues; one that opens thousands of reads at once is refused.
const MaxReadQueue = 1024

// MaxReadQueueTotal is the default bound on the event reads waiting for
// a slot in the process, all owners together
// (Options.MaxReadQueueTotal): one more fails at once with
// [ErrReadQueueFull]. [MaxReadQueue] bounds one owner's; this bounds
// what many owners' queues make the process hold (a waiting read is a
// request's goroutine and connection, about 20 KiB), whatever the number
// of keys. Its last quarter is kept for the owners with few reads
// waiting (fewer than 8 with the default): past three quarters, a read
// of an owner with more waiting fails with [ErrReadBusy], its share
// taken, so that owners with many queued cannot fill it and leave
// another's read nothing but ErrReadQueueFull; that takes 256 owners
// at once (internal/fairshare).
const MaxReadQueueTotal = 8192

// ErrReadQueueFull: the process had Options.MaxReadQueueTotal event
// reads waiting for a slot, all owners together; nothing was read. It is
// the server's bound, not the owner's: the server answers 503 with
// Retry-After.
var ErrReadQueueFull = errors.New("too many event reads waiting on this server")

// ErrReadBusy: the owner's event reads were over their bounds (see
// [MaxReadsPerOwner], [MaxReadQueue], [MaxReadWait]), or over its share
// of [MaxReadQueueTotal]; nothing was read.
// The server answers 429 with Retry-After.
var ErrReadBusy = errors.New("too many event reads at once")

// MaxReadWait is the default of how long an event read waits for a slot
// before it fails with [ErrReadBusy] (Options.MaxReadWait). A read loads
// for milliseconds, so a client that follows many sessions of one key at
// once (a long-poll each) queues for a slot rather than getting 429s,
// while what the key makes the server hold stays bounded by the slots.
// It is longer than a long-poll's longest wait (25 s): a read that
// queues is answered in its turn, where a 429 would send the client to
// the back of the queue (S′ of issue 36: 256 sessions of one key on
// PostgreSQL at a load of 17 queued for more than the 2 s this was).
const MaxReadWait = 30 * time.Second

// readSlots hands out the event reads' slots: at most perOwner loading
// for each owner and total in all; the reads that find none wait in
// their owner's queue, in order.
type readSlots struct {
	mu      sync.Mutex
	total   int                      // reads loading, all owners
	waiting int                      // reads waiting, all owners
	busy    map[string]int           // reads loading, by owner
	queue   map[string][]*readWaiter // reads waiting, by owner, oldest first
	seq     uint64                   // the number of the next waiter
}

// A readWaiter is a read waiting for a slot; ready is closed when it was
// given one (granted).
type readWaiter struct {
	seq     uint64
	granted bool
	ready   chan struct{}
}

// readLimits are the bounds of the manager's reads, defaults applied.
func (m *Manager) readLimits() (perOwner, total, queue, queueTotal int, wait time.Duration) {
	perOwner, total, queue, queueTotal, wait = m.opts.MaxReadsPerOwner, m.opts.MaxReads, m.opts.MaxReadQueue, m.opts.MaxReadQueueTotal, m.opts.MaxReadWait
	if perOwner <= 0 {
		perOwner = MaxReadsPerOwner
	}
	if total <= 0 {
		total = MaxReads
	}
	if queue == 0 {
		queue = MaxReadQueue
	}
	if queueTotal == 0 {
		queueTotal = MaxReadQueueTotal
	}
	if wait == 0 {
		wait = MaxReadWait
	}
	return perOwner, total, max(queue, 0), max(queueTotal, 0), wait
}

// acquireRead takes a read slot for owner, waiting for one in owner's
// queue at most Options.MaxReadWait (and while ctx lasts), or fails with
// [ErrReadBusy] (at once when owner's queue is full, or holds its share
// of Options.MaxReadQueueTotal, see internal/fairshare), or with
// [ErrReadQueueFull] at once when the process's reads waiting are at
// Options.MaxReadQueueTotal. The caller calls the release it returns.
func (m *Manager) acquireRead(ctx context.Context, owner string) (release func(), err error) {
	perOwner, total, queue, queueTotal, wait := m.readLimits()
	r := &m.reads
	release = func() { r.give(owner, perOwner, total) }
	r.mu.Lock()
	if r.busy == nil {
		r.busy, r.queue = map[string]int{}, map[string][]*readWaiter{}
	}
	if n := r.busy[owner]; n < perOwner && r.total < total && len(r.queue[owner]) == 0 {
		r.busy[owner] = n + 1
		r.total++
		r.mu.Unlock()
		return release, nil
	}
	if q := len(r.queue[owner]); q >= queue || wait < 0 {
		n := r.busy[owner]
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: this key already has %d reads of events loading and %d waiting (at most %d and %d): retry in a moment", ErrReadBusy, n, q, perOwner, queue)
	}
	if r.waiting >= queueTotal {
		n := r.waiting
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %d reads of events of all keys wait for a slot (at most %d): retry in a moment", ErrReadQueueFull, n, queueTotal)
	}
	if q := len(r.queue[owner]); !fairshare.Allows(q, r.waiting, queueTotal) {
		n := r.waiting
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: this key already has %d reads of events waiting, its share while %d reads of all keys wait (at most %d): retry in a moment", ErrReadBusy, q, n, queueTotal)
	}
	w := &readWaiter{seq: r.seq, ready: make(chan struct{})}
	r.seq++
	r.queue[owner] = append(r.queue[owner], w)
	r.waiting++
	r.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return release, nil
	case <-t.C:
		err = fmt.Errorf("%w: this key's reads of events waited %s for a slot (at most %d loading at once): retry in a moment", ErrReadBusy, wait, perOwner)
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.mu.Lock()
	if w.granted {
		// Given a slot as the wait ended: give it on.
		r.mu.Unlock()
		release()
		return nil, err
	}
	q := r.queue[owner]
	if i := slices.Index(q, w); i >= 0 {
		q = slices.Delete(q, i, i+1)
		r.waiting--
	}
	if len(q) == 0 {
		delete(r.queue, owner)
	} else {
		r.queue[owner] = q
	}
	r.mu.Unlock()
	return nil, err
}

// eventsWithin reads up to limit events of id from index from, at most
// the read budget (plus one event), holding one of owner's read slots:
// the slot is given back on every path, a panic of the store's too (the
// HTTP server recovers a handler's panic; a slot kept would be lost for
// good, and with it, in time, every read of the owner's).
func (m *Manager) eventsWithin(ctx context.Context, owner, id string, from int64, limit int) ([]store.Event, error) {
	release, err := m.acquireRead(ctx, owner)
	if err != nil {
		return nil, err
	}
	defer release()
	return m.st.EventsWithin(ctx, id, from, limit, m.readBudget())
}

// give hands one of owner's slots back, and the freed slots to the
// waiting reads (see dispatch).
func (r *readSlots) give(owner string, perOwner, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy[owner]--; r.busy[owner] <= 0 {
		delete(r.busy, owner)
	}
	r.total--
	r.dispatch(perOwner, total)
}

// dispatch gives the free slots to the waiting reads: each to the oldest
// read of the owner with the fewest reads loading that may load one more
// (the owner whose oldest read waited longest among equals), so that an
// owner's queue, however long, delays another owner's read by at most
// the reads already loading. It loops over the owners that wait (at most
// the keys and their share links).
func (r *readSlots) dispatch(perOwner, total int) {
	for r.total < total {
		best, found := "", false
		for o, q := range r.queue {
			n := r.busy[o]
			if n >= perOwner {
				continue
			}
			if !found || n < r.busy[best] || n == r.busy[best] && q[0].seq < r.queue[best][0].seq {
				best, found = o, true
			}
		}
		if !found {
			return
		}
		q := r.queue[best]
		w := q[0]
		q[0] = nil
		if q = q[1:]; len(q) == 0 {
			delete(r.queue, best)
		} else {
			r.queue[best] = q
		}
		r.waiting--
		r.busy[best]++
		r.total++
		w.granted = true
		close(w.ready)
	}
}

// readState reports the slots in use and the reads waiting, for tests.
func (r *readSlots) readState() (loading, waiting int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total, r.waiting
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

// Reads reports the event reads loading now and those waiting for a
// slot, all owners together: at most Options.MaxReads loading, and
// Options.MaxReadQueue waiting per owner and Options.MaxReadQueueTotal
// in all.
func (m *Manager) Reads() (loading, waiting int) {
	return m.reads.readState()
}
