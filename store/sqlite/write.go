package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Group commit. SQLite has one writer, and a commit costs the same whatever
// it holds: the transaction's begin and end, the WAL frames of every page
// it touched (the tables' and indexes' inner pages are the same from one
// session's write to the next) and, with synchronous = FULL, a sync of the
// WAL (fdatasync: see syncWithFdatasync). So the writes that wait while
// one commits are committed together, in one transaction, each in a
// savepoint of its own: a write that fails is
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
//
// A write sees the transaction as a *writeTx, which keeps every result set
// the write opens and closes them all when the write returns, before its
// savepoint is released or rolled back: SQLite refuses to release a
// savepoint while a writing statement is unfinished (an INSERT ...
// RETURNING whose rows were not all read), so a result set left open
// would otherwise fail every write of its batch.

// maxBatch bounds the writes committed together.
const maxBatch = 64

// writeReq is one write waiting to be committed.
type writeReq struct {
	ctx context.Context
	fn  func(context.Context, *writeTx) error
	err error
	// lead is sent true when this write's caller is to commit the
	// batch at the head of the queue, which holds its write, and false
	// when another caller has committed (or failed) it.
	lead chan bool
}

// write runs fn in a transaction on the writer connection, and returns
// once it is committed (or failed).
func (s *Store) write(ctx context.Context, fn func(context.Context, *writeTx) error) error {
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
	committed := false
	defer func() {
		if !committed {
			s.forgetHookless() // see hooklessOwners
		}
	}()
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
		committed = r.err == nil
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
		return
	}
	committed = true
}

// run runs the write's function, turning a panic into its error, so that
// a bug in one write neither leaves the transaction open nor stops the
// writes queued behind it, and closes the result sets it left open.
func (r *writeReq) run(ctx context.Context, tx *sql.Tx) (err error) {
	wt := &writeTx{tx: tx}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlite store: write panicked: %v", p)
		}
		if cerr := wt.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	return r.fn(ctx, wt)
}

// writeTx is a write's view of its batch's transaction: the methods of
// [sql.Tx] a write needs, which keep the result sets they open so that
// the batch closes them when the write returns (see "Group commit"
// above). A writeTx is used by one goroutine, for one write.
type writeTx struct {
	tx   *sql.Tx
	open []*sql.Rows
}

// ExecContext runs a statement that returns no rows, as
// [sql.Tx.ExecContext].
func (t *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query, as [sql.Tx.QueryContext]. The rows are closed
// when the write returns, if not before.
func (t *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.keep(t.tx.QueryContext(ctx, query, args...))
}

// QueryRowContext runs a query that returns at most one row, as
// [sql.Tx.QueryRowContext]: [row.Scan] reads it and closes the rows, which
// are closed when the write returns if it never scans them.
func (t *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *row {
	rows, err := t.QueryContext(ctx, query, args...)
	return &row{rows: rows, err: err}
}

// StmtContext returns the transaction's version of a prepared statement,
// as [sql.Tx.StmtContext].
func (t *writeTx) StmtContext(ctx context.Context, st *sql.Stmt) *writeStmt {
	return &writeStmt{t: t, st: t.tx.StmtContext(ctx, st)}
}

func (t *writeTx) keep(rows *sql.Rows, err error) (*sql.Rows, error) {
	if err != nil {
		return nil, err
	}
	t.open = append(t.open, rows)
	return rows, nil
}

// close closes the result sets the write opened; closing one already
// closed does nothing.
func (t *writeTx) close() error {
	var errs []error
	for _, rows := range t.open {
		errs = append(errs, rows.Close())
	}
	t.open = nil
	return errors.Join(errs...)
}

// writeStmt is a prepared statement bound to a write's transaction.
type writeStmt struct {
	t  *writeTx
	st *sql.Stmt
}

// ExecContext runs the statement, as [sql.Stmt.ExecContext].
func (s *writeStmt) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return s.st.ExecContext(ctx, args...)
}

// QueryContext runs the statement as a query, as [sql.Stmt.QueryContext];
// the rows are closed when the write returns, if not before.
func (s *writeStmt) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	return s.t.keep(s.st.QueryContext(ctx, args...))
}

// QueryRowContext runs the statement as a query of at most one row, as
// [sql.Stmt.QueryRowContext].
func (s *writeStmt) QueryRowContext(ctx context.Context, args ...any) *row {
	rows, err := s.QueryContext(ctx, args...)
	return &row{rows: rows, err: err}
}

// row is the result of QueryRowContext, read as [sql.Row] is read.
type row struct {
	rows *sql.Rows
	err  error
}

// Scan copies the first row's columns into dest and closes the rows; with
// no row it returns [sql.ErrNoRows].
func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	return r.rows.Close()
}
