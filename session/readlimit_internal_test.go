package session

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// reader is one read that waits for a slot in a test: got says when it
// had one (or failed).
type reader struct {
	owner   string
	got     chan error
	release func()
}

func startRead(t *testing.T, m *Manager, ctx context.Context, owner string) *reader {
	t.Helper()
	r := &reader{owner: owner, got: make(chan error, 1)}
	go func() {
		rel, err := m.acquireRead(ctx, owner)
		r.release = rel
		r.got <- err
	}()
	return r
}

// waitQueued waits until n reads wait for a slot (a hang check).
func waitQueued(t *testing.T, m *Manager, n int) {
	t.Helper()
	for range 10000 {
		if _, w := m.Reads(); w == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	_, w := m.Reads()
	t.Fatalf("%d reads wait, want %d", w, n)
}

func mustGet(t *testing.T, r *reader) {
	t.Helper()
	select {
	case err := <-r.got:
		if err != nil {
			t.Fatalf("%s's read: %v", r.owner, err)
		}
	case <-time.After(time.Minute): // a hang check
		t.Fatalf("%s's read never had a slot", r.owner)
	}
}

func mustWait(t *testing.T, r *reader) {
	t.Helper()
	select {
	case err := <-r.got:
		t.Fatalf("%s's read ended (%v) while it should wait", r.owner, err)
	default:
	}
}

// TestReadSlotsFair: with the process's slots all taken by one key
// flooding, a read of another key that comes after the flood's queued
// reads is given the next freed slot before them; the flood's reads then
// load in their order. Counted, not timed.
func TestReadSlotsFair(t *testing.T) {
	m := &Manager{opts: Options{MaxReadsPerOwner: 2, MaxReads: 2, MaxReadWait: time.Hour}}
	ctx := t.Context()
	a1, a2 := startRead(t, m, ctx, "a"), startRead(t, m, ctx, "a")
	mustGet(t, a1)
	mustGet(t, a2)
	var queued []*reader
	for i := range 3 {
		queued = append(queued, startRead(t, m, ctx, "a"))
		waitQueued(t, m, i+1)
	}
	b := startRead(t, m, ctx, "b")
	waitQueued(t, m, 4)
	mustWait(t, b)

	a1.release()
	mustGet(t, b) // before a's three queued reads
	for _, r := range queued {
		mustWait(t, r)
	}
	if loading, waiting := m.Reads(); loading != 2 || waiting != 3 {
		t.Fatalf("%d loading, %d waiting; want 2 and 3", loading, waiting)
	}
	// a's reads load in their order as slots free.
	b.release()
	mustGet(t, queued[0])
	mustWait(t, queued[1])
	a2.release()
	mustGet(t, queued[1])
	mustWait(t, queued[2])
	queued[0].release()
	mustGet(t, queued[2])
	queued[1].release()
	queued[2].release()
	if loading, waiting := m.Reads(); loading != 0 || waiting != 0 {
		t.Fatalf("%d loading, %d waiting at the end", loading, waiting)
	}
	if len(m.reads.busy) != 0 || len(m.reads.queue) != 0 {
		t.Fatalf("left in the maps: %v, %v", m.reads.busy, m.reads.queue)
	}
}

// TestReadSlotsPerOwner: an owner at its own bound waits while another
// owner, under the process's bound, reads at once.
func TestReadSlotsPerOwner(t *testing.T) {
	m := &Manager{opts: Options{MaxReadsPerOwner: 1, MaxReads: 3, MaxReadWait: time.Hour}}
	ctx := t.Context()
	a := startRead(t, m, ctx, "a")
	mustGet(t, a)
	a2 := startRead(t, m, ctx, "a")
	waitQueued(t, m, 1)
	b := startRead(t, m, ctx, "b")
	mustGet(t, b)
	mustWait(t, a2)
	a.release()
	mustGet(t, a2)
	a2.release()
	b.release()
}

// TestReadQueueBounded: the reads one owner has waiting are bounded: one
// more fails at once with ErrReadBusy, and another owner still queues.
// A waiting read whose context ends, or whose wait runs out, leaves the
// queue.
func TestReadQueueBounded(t *testing.T) {
	m := &Manager{opts: Options{MaxReadsPerOwner: 1, MaxReads: 1, MaxReadQueue: 2, MaxReadWait: time.Hour}}
	ctx := t.Context()
	a := startRead(t, m, ctx, "a")
	mustGet(t, a)
	cctx, cancel := context.WithCancel(ctx)
	q1 := startRead(t, m, cctx, "a")
	waitQueued(t, m, 1)
	q2 := startRead(t, m, ctx, "a")
	waitQueued(t, m, 2)
	if _, err := m.acquireRead(ctx, "a"); !errors.Is(err, ErrReadBusy) {
		t.Fatalf("a third waiting read: %v, want ErrReadBusy", err)
	}
	b := startRead(t, m, ctx, "b")
	waitQueued(t, m, 3)
	cancel()
	if err := <-q1.got; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled read: %v", err)
	}
	waitQueued(t, m, 2)
	a.release()
	mustGet(t, q2) // the older of the two owners' heads
	mustWait(t, b)
	q2.release()
	mustGet(t, b)
	b.release()

	// A wait that runs out fails with ErrReadBusy and leaves the queue.
	m.opts.MaxReadWait = time.Millisecond
	hold := startRead(t, m, ctx, "a")
	mustGet(t, hold)
	if _, err := m.acquireRead(ctx, "a"); !errors.Is(err, ErrReadBusy) {
		t.Fatalf("a read past its wait: %v, want ErrReadBusy", err)
	}
	hold.release()
	if loading, waiting := m.Reads(); loading != 0 || waiting != 0 {
		t.Fatalf("%d loading, %d waiting at the end", loading, waiting)
	}
}

// queued counts the reads in the owners' queues, to hold the count the
// slots keep to them.
func queued(m *Manager) int {
	m.reads.mu.Lock()
	defer m.reads.mu.Unlock()
	n := 0
	for _, q := range m.reads.queue {
		n += len(q)
	}
	return n
}

// TestReadQueueTotalBounded: the reads waiting in the process, all
// owners together, are bounded (Options.MaxReadQueueTotal): past it a
// read of any owner fails at once with ErrReadQueueFull, not
// ErrReadBusy (an owner over its own queue's bound still gets
// ErrReadBusy); a read that leaves the queue (cancelled, given a slot,
// or out of time) makes room again. Before the bound, owners' queues
// together held what the keys made them hold.
func TestReadQueueTotalBounded(t *testing.T) {
	m := &Manager{opts: Options{MaxReadsPerOwner: 1, MaxReads: 1, MaxReadQueue: 2, MaxReadQueueTotal: 3, MaxReadWait: time.Hour}}
	ctx := t.Context()
	a := startRead(t, m, ctx, "a")
	mustGet(t, a)
	a1 := startRead(t, m, ctx, "a")
	waitQueued(t, m, 1)
	a2 := startRead(t, m, ctx, "a")
	waitQueued(t, m, 2)
	bctx, cancelB := context.WithCancel(ctx)
	b1 := startRead(t, m, bctx, "b")
	waitQueued(t, m, 3)
	if _, err := m.acquireRead(ctx, "a"); !errors.Is(err, ErrReadBusy) || errors.Is(err, ErrReadQueueFull) {
		t.Fatalf("a's third waiting read: %v, want ErrReadBusy (the key's bound)", err)
	}
	for _, o := range []string{"b", "c"} {
		if _, err := m.acquireRead(ctx, o); !errors.Is(err, ErrReadQueueFull) || errors.Is(err, ErrReadBusy) {
			t.Fatalf("%s's read with 3 waiting in all: %v, want ErrReadQueueFull", o, err)
		}
	}
	if n := queued(m); n != 3 {
		t.Fatalf("%d reads in the queues, want 3", n)
	}
	cancelB()
	if err := <-b1.got; !errors.Is(err, context.Canceled) {
		t.Fatalf("b's cancelled read: %v", err)
	}
	waitQueued(t, m, 2)
	c := startRead(t, m, ctx, "c")
	waitQueued(t, m, 3)
	a.release()
	mustGet(t, a1) // the oldest of the owners with none loading
	waitQueued(t, m, 2)
	d := startRead(t, m, ctx, "d")
	waitQueued(t, m, 3)
	a1.release()
	mustGet(t, a2) // older than c's and d's, and a has none loading
	a2.release()
	mustGet(t, c)
	c.release()
	mustGet(t, d)
	d.release()
	if loading, waiting := m.Reads(); loading != 0 || waiting != 0 || queued(m) != 0 {
		t.Fatalf("%d loading, %d waiting (%d queued) at the end", loading, waiting, queued(m))
	}
}

// TestReadSlotsRandom: reads of several owners, some cancelled, some out
// of time, some given a slot as their wait ends, all within the bounds at
// every step; at the end no slot is held, no read is counted waiting,
// and the maps are empty.
func TestReadSlotsRandom(t *testing.T) {
	m := &Manager{opts: Options{MaxReadsPerOwner: 2, MaxReads: 3, MaxReadQueue: 4, MaxReadQueueTotal: 6, MaxReadWait: 3 * time.Millisecond}}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(4))*time.Millisecond)
				rel, err := m.acquireRead(ctx, string(rune('a'+rng.IntN(4))))
				if err == nil {
					if loading, waiting := m.Reads(); loading > 3 || waiting > 6 {
						t.Errorf("%d loading, %d waiting: over the bounds", loading, waiting)
					}
					if rng.IntN(2) == 0 {
						time.Sleep(time.Duration(rng.IntN(2)) * time.Millisecond)
					}
					rel()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if loading, waiting := m.Reads(); loading != 0 || waiting != 0 || queued(m) != 0 {
		t.Fatalf("%d loading, %d waiting (%d queued) at the end", loading, waiting, queued(m))
	}
	if len(m.reads.busy) != 0 || len(m.reads.queue) != 0 {
		t.Fatalf("left in the maps: %v, %v", m.reads.busy, m.reads.queue)
	}
}
