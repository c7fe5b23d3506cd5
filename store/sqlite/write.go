package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/hrns-dev/hrns/store"
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
	if s.wclosed {
		s.wmu.Unlock()
		return store.ErrClosed
	}
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
		if s.wdrained != nil {
			close(s.wdrained) // Close waits for it
			s.wdrained = nil
		}
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
	if err := s.begin(ctx); err != nil {
		fail(err, batch)
		return
	}
	if len(batch) == 1 {
		r := batch[0]
		if err := r.run(ctx, s.wc); err != nil {
			s.rollback(ctx)
			r.err = s.wrap(err)
			return
		}
		r.err = s.wrap(s.end(ctx))
		committed = r.err == nil
		return
	}
	var done []*writeReq // the writes in the transaction
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if _, err := s.savepointStmt.ExecContext(ctx); err != nil {
			s.rollback(ctx)
			fail(err, batch)
			return
		}
		if err := r.run(ctx, s.wc); err != nil {
			r.err = s.wrap(err)
			// What the write learned of the webhooks may be undone
			// with it (a webhook it deleted, then found none).
			s.forgetHookless()
			if _, rerr := s.rollbackToStmt.ExecContext(ctx); rerr != nil {
				// SQLite rolled the whole transaction back (an I/O
				// error, a full disk): the writes before this one are
				// gone with it.
				s.rollback(ctx)
				fail(fmt.Errorf("rolled back with a write committed alongside, which failed: %w", err), done)
				fail(err, batch)
				return
			}
		}
		if _, err := s.releaseSavepointStmt.ExecContext(ctx); err != nil {
			s.rollback(ctx)
			fail(err, batch)
			return
		}
		if r.err == nil {
			done = append(done, r)
		}
	}
	if len(done) == 0 {
		s.rollback(ctx)
		return
	}
	if err := s.end(ctx); err != nil {
		fail(err, done)
		return
	}
	committed = true
}

// The writer connection. Every write runs on one connection, which the
// store holds from Open to Close (a [sql.Conn]), with its statements
// prepared on it once: the transaction's (BEGIN IMMEDIATE, COMMIT,
// ROLLBACK, the savepoints') and the writes' own. A [sql.Tx] instead
// prepared BEGIN at every commit and made each prepared statement a
// transaction-bound copy at every run ([sql.Tx.StmtContext]).
//
// The connection's transaction is the store's to end: a failed COMMIT is
// followed by a ROLLBACK, and a ROLLBACK that fails leaves the
// connection in a state the store does not know, so the next commit
// discards it and opens a new one (reopenWriter), as database/sql does
// with a connection its driver reports broken.

// begin begins the writer's transaction, on a new connection if the
// writer's is broken or is found gone.
func (s *Store) begin(ctx context.Context) error {
	if s.wbroken {
		if err := s.reopenWriter(ctx); err != nil {
			return err
		}
	}
	_, err := s.beginStmt.ExecContext(ctx)
	if err != nil && (errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)) {
		if err = s.reopenWriter(ctx); err == nil {
			_, err = s.beginStmt.ExecContext(ctx)
		}
	}
	return err
}

// end commits the writer's transaction; if the commit fails, the
// transaction is rolled back.
func (s *Store) end(ctx context.Context) error {
	_, err := s.commitStmt.ExecContext(ctx)
	if err != nil {
		s.rollback(ctx)
	}
	return err
}

// rollback rolls the writer's transaction back. SQLite may have rolled
// it back already (an I/O error, a full disk), and then refuses; either
// way the connection is reopened before the next commit.
func (s *Store) rollback(ctx context.Context) {
	if _, err := s.rollbackStmt.ExecContext(ctx); err != nil {
		s.wbroken = true
	}
}

// openWriter takes the writer connection and prepares its statements.
func (s *Store) openWriter(ctx context.Context) error {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	s.wc = c
	for _, p := range s.writerStatements() {
		if *p.stmt, err = c.PrepareContext(ctx, p.sql); err != nil {
			return err
		}
	}
	s.wbroken = false
	return nil
}

// closeWriter closes the writer's statements and gives its connection
// back, discarding it if discard (database/sql then opens a new one).
func (s *Store) closeWriter(discard bool) error {
	var errs []error
	for _, p := range s.writerStatements() {
		if *p.stmt != nil {
			errs = append(errs, (*p.stmt).Close())
			*p.stmt = nil
		}
	}
	if s.wc != nil {
		if discard {
			s.wc.Raw(func(any) error { return driver.ErrBadConn })
		}
		errs = append(errs, s.wc.Close())
		s.wc = nil
	}
	return errors.Join(errs...)
}

// reopenWriter discards the writer connection and opens a new one.
func (s *Store) reopenWriter(ctx context.Context) error {
	s.closeWriter(true)
	s.wbroken = true // until openWriter succeeds
	return s.openWriter(ctx)
}

// run runs the write's function, turning a panic into its error, so that
// a bug in one write neither leaves the transaction open nor stops the
// writes queued behind it, and closes the result sets it left open.
func (r *writeReq) run(ctx context.Context, c *sql.Conn) (err error) {
	wt := &writeTx{c: c}
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

// writeTx is a write's view of its batch's transaction, on the writer
// connection: the methods of [sql.Tx] a write needs, which keep the result sets they open so that
// the batch closes them when the write returns (see "Group commit"
// above). A writeTx is used by one goroutine, for one write.
type writeTx struct {
	c    *sql.Conn
	open []*sql.Rows
}

// ExecContext runs a statement that returns no rows, as
// [sql.Tx.ExecContext].
func (t *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.c.ExecContext(ctx, query, args...)
}

// QueryContext runs a query, as [sql.Tx.QueryContext]. The rows are closed
// when the write returns, if not before.
func (t *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.keep(t.c.QueryContext(ctx, query, args...))
}

// QueryRowContext runs a query that returns at most one row, as
// [sql.Tx.QueryRowContext]: [row.Scan] reads it and closes the rows, which
// are closed when the write returns if it never scans them.
func (t *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *row {
	rows, err := t.QueryContext(ctx, query, args...)
	return &row{rows: rows, err: err}
}

// StmtContext returns a statement prepared on the writer connection (one
// of writerStatements) for the write to run, as [sql.Tx.StmtContext]
// does.
func (t *writeTx) StmtContext(ctx context.Context, st *sql.Stmt) writeStmt {
	return writeStmt{t: t, st: st}
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

// writeStmt is a prepared statement of the writer connection, run by a
// write.
type writeStmt struct {
	t  *writeTx
	st *sql.Stmt
}

// ExecContext runs the statement, as [sql.Stmt.ExecContext].
func (s writeStmt) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return s.st.ExecContext(ctx, args...)
}

// QueryContext runs the statement as a query, as [sql.Stmt.QueryContext];
// the rows are closed when the write returns, if not before.
func (s writeStmt) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	return s.t.keep(s.st.QueryContext(ctx, args...))
}

// QueryRowContext runs the statement as a query of at most one row, as
// [sql.Stmt.QueryRowContext].
func (s writeStmt) QueryRowContext(ctx context.Context, args ...any) *row {
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
