package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// Group commit. SQLite has one writer, and a commit costs the same whatever
// it holds: the transaction's begin and end, the WAL frames of every page
// it touched (the tables' and indexes' inner pages are the same from one
// session's write to the next) and, with synchronous = FULL, an fsync. So
// the writes that wait while one commits are committed together, in one
// transaction, each in a savepoint of its own: a write that fails is
// rolled back to its savepoint and fails alone, as if it had run in a
// transaction of its own, and the others are committed. Every write
// returns after the commit that holds it, so a write that returned is on
// disk, as before.
//
// No goroutine does this: the first writer to find no one committing
// commits its own write with every write queued behind it (up to
// maxBatch), then hands the commit to the head of the queue, if any, and
// returns. A write that finds no one waiting commits alone, as before,
// without a savepoint.
//
// The writes of a batch run with a context of their own, which is never
// cancelled: a caller's cancellation interrupts SQLite, and an interrupt
// may roll back the whole transaction, which would fail the other writes
// of the batch. A caller's context is checked before its write starts; a
// write that started runs to its end (each is a few statements).

// maxBatch bounds the writes committed together.
const maxBatch = 64

// writeReq is one write waiting to be committed.
type writeReq struct {
	ctx context.Context
	fn  func(context.Context, *sql.Tx) error
	err error
	// lead is sent true when this write's caller is to commit the
	// batch at the head of the queue, which holds its write, and false
	// when another caller has committed (or failed) it.
	lead chan bool
}

// write runs fn in a transaction on the writer connection, and returns
// once it is committed (or failed).
func (s *Store) write(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, fn: fn, lead: make(chan bool, 1)}
	s.wmu.Lock()
	s.queue = append(s.queue, r)
	wait := s.leading
	s.leading = true
	s.wmu.Unlock()
	if wait && !<-r.lead {
		return r.err
	}
	// r is at the head of the queue: commit a batch holding it, then hand
	// over to whoever is queued next.
	s.wmu.Lock()
	n := min(len(s.queue), maxBatch)
	batch := make([]*writeReq, n)
	copy(batch, s.queue)
	s.queue = append(s.queue[:0], s.queue[n:]...)
	s.wmu.Unlock()

	s.commit(batch)

	s.wmu.Lock()
	if len(s.queue) > 0 {
		s.queue[0].lead <- true
	} else {
		s.leading = false
	}
	s.wmu.Unlock()
	for _, o := range batch[1:] {
		o.lead <- false
	}
	return r.err
}

// commit runs the batch's writes in one transaction and sets their errors.
func (s *Store) commit(batch []*writeReq) {
	if s.batchHook != nil {
		s.batchHook(len(batch))
	}
	ctx := context.WithoutCancel(batch[0].ctx)
	fail := func(err error, rs []*writeReq) {
		for _, r := range rs {
			if r.err == nil {
				r.err = s.wrap(err)
			}
		}
	}
	if len(batch) == 1 {
		if err := batch[0].ctx.Err(); err != nil {
			batch[0].err = err
			return
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		fail(err, batch)
		return
	}
	if len(batch) == 1 {
		r := batch[0]
		if err := r.run(ctx, tx); err != nil {
			tx.Rollback()
			r.err = s.wrap(err)
			return
		}
		r.err = s.wrap(tx.Commit())
		return
	}
	var done []*writeReq // the writes in the transaction
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if _, err := tx.StmtContext(ctx, s.savepointStmt).ExecContext(ctx); err != nil {
			tx.Rollback()
			fail(err, batch)
			return
		}
		if err := r.run(ctx, tx); err != nil {
			r.err = s.wrap(err)
			if _, rerr := tx.StmtContext(ctx, s.rollbackToStmt).ExecContext(ctx); rerr != nil {
				// SQLite rolled the whole transaction back (an I/O
				// error, a full disk): the writes before this one are
				// gone with it.
				tx.Rollback()
				fail(fmt.Errorf("rolled back with a write committed alongside, which failed: %w", err), done)
				fail(err, batch)
				return
			}
		}
		if _, err := tx.StmtContext(ctx, s.releaseSavepointStmt).ExecContext(ctx); err != nil {
			tx.Rollback()
			fail(err, batch)
			return
		}
		if r.err == nil {
			done = append(done, r)
		}
	}
	if len(done) == 0 {
		tx.Rollback()
		return
	}
	if err := tx.Commit(); err != nil {
		fail(err, done)
	}
}

// run runs the write's function, turning a panic into its error, so that
// a bug in one write neither leaves the transaction open nor stops the
// writes queued behind it.
func (r *writeReq) run(ctx context.Context, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlite store: write panicked: %v", p)
		}
	}()
	return r.fn(ctx, tx)
}
