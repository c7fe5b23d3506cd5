// Package sqlite implements [store.Store] in one SQLite file, with the pure
// Go driver modernc.org/sqlite (no C toolchain needed).
//
//	st, err := sqlite.Open("hrns.db", nil)
//	if err != nil { ... }
//	defer st.Close()
//
// # Connections and pragmas
//
// The store opens the file twice: one writer connection, through which
// every write goes one at a time (so writers never contend for SQLite's
// lock), and a pool of reader connections (Options.Readers) that WAL lets
// read while the writer writes. Each connection runs:
//
//	journal_mode = WAL      readers do not block the writer nor it them
//	synchronous  = FULL     a commit is on disk before it returns (NORMAL
//	                        with Options.RelaxedSync: a power loss may
//	                        then lose the last commits, a crash may not)
//	busy_timeout = 10000    wait up to 10 s for a lock instead of failing
//	foreign_keys = ON       events belong to their session
//	temp_store   = MEMORY
//
// and the readers also run query_only = ON.
//
// A commit reaches the disk through fdatasync(2), as the SQLite of every
// Linux distribution does, not fsync(2), the default of the transpiled
// library (see syncWithFdatasync): the same data and the size of the file
// are on disk when the commit returns, but not the file's timestamps,
// whose write (a journal commit, or on ext4 without a journal a second
// synchronous write, of the WAL's inode) an fsync waited for too.
//
// # Statements
//
// The statements of the hot paths (reading a session, its events and
// transcript, updating it, claiming, renewing and releasing leases, the
// next wake-up) are prepared once per connection at Open. No LIMIT or
// OFFSET is a bare parameter: SQLite plans with the value bound to a
// bare `LIMIT ?` and so marks the statement to be prepared again at each
// new binding, which parsed the claim and events statements at every
// call (a fifth of the server's CPU). They are written `LIMIT ? + 0`, an
// expression SQLite does not plan with; TestNoBareLimitParameter keeps
// it so.
//
// # One process
//
// A SQLite store belongs to one process: Open takes an exclusive lock on
// PATH.lock (on Unix) and fails if another process holds it. Leases left
// in the file by a previous process are therefore void, and Open releases
// them, so the sessions that process was running are claimed again at
// once, and so are the schedule runs it was completing and the webhook
// deliveries it was attempting. Several server processes share a
// PostgreSQL store instead.
//
// Wake-ups ([store.Store.Subscribe]) are delivered in process, after each
// commit.
//
// # Migrations
//
// The schema is created and upgraded by the SQL files embedded from
// migrations/, applied in order; PRAGMA user_version records the last one.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/internal/wake"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure a [Store]. A nil *Options means the defaults.
type Options struct {
	// Readers bounds the reader connections; 0 means 4.
	Readers int
	// RelaxedSync sets synchronous = NORMAL instead of FULL: faster
	// commits, but a power loss (not a process crash) may undo the last
	// ones.
	RelaxedSync bool
}

// Store is a [store.Store] in a SQLite file.
type Store struct {
	// fixed at creation
	w, r *sql.DB // w has one connection, which wc holds
	lock interface{ Close() error }
	hub  wake.Hub
	// prepared statements of the hot paths
	getStmt, eventsStmt, countStmt               *sql.Stmt // on the readers
	versionStmt, updateStmt, updateSameAgentStmt *sql.Stmt // on the writer
	// updateClaimStmt and updateClaimSameAgentStmt are updateStmt and
	// updateSameAgentStmt for a commit that claims the session
	// (store.UpdateOptions.Claim): they take the lease in the same
	// statement.
	updateClaimStmt, updateClaimSameAgentStmt *sql.Stmt
	// oneStmt and oneClaimStmt are a commit's update in one statement,
	// without reading the session first (see UpdateSession).
	oneStmt, oneClaimStmt *sql.Stmt
	// slowUpdates, set by tests only, makes every UpdateSession read the
	// session first, as before oneStmt; oneHook, set by tests only, is
	// called with whether oneStmt made each commit's update.
	slowUpdates bool
	oneHook     func(applied bool)
	// insertEventStmts[k-1] inserts k events (see insertRows)
	insertEventStmts [maxInsertRows]*sql.Stmt
	// the transcript: messagesStmt on the readers, the others on the writer
	messagesStmt, messageCountStmt, trimMessagesStmt *sql.Stmt
	insertMessageStmts                               [maxInsertRows]*sql.Stmt // as insertEventStmts
	// the dispatcher's and the leases': nextWakeStmt on the readers
	claimStmt, takeStmt, renewStmt, releaseStmt, addTokensStmt  *sql.Stmt
	countTokensStmt                                             *sql.Stmt      // a commit's tokens (quota.go)
	claimOwnersStmt, claimWakeStmt, claimBusyStmt, claimOwnStmt *sql.Stmt      // Claim's, beside claimStmt
	hooksStmt                                                   *sql.Stmt      // an owner's webhooks, at each status change
	hookless                                                    hooklessOwners // owners hooksStmt found none of (webhooks.go)
	insertSessionStmt, byKeyStmt                                *sql.Stmt      // CreateSession
	nextWakeStmt                                                *sql.Stmt

	closeOnce sync.Once
	closeErr  error

	// the writes waiting to be committed (see write.go)
	wmu     sync.Mutex
	queue   []*writeReq
	leading bool // a writer is committing, or the head of queue is told to
	// wclosed: Close began, so no write is queued any more; wdrained,
	// when set, is closed by the last leader once the queue is empty,
	// for Close to wait for the writes it found in flight before it
	// closes the writer connection under them.
	wclosed  bool
	wdrained chan struct{}
	// batchHook, set by tests only, is called with each batch's size.
	batchHook func(n int)
	// savepoint statements on the writer, for batches of writes
	savepointStmt, rollbackToStmt, releaseSavepointStmt *sql.Stmt
	// the writer connection, which every write runs on, held from Open
	// to Close (see openWriter), and its transaction's statements
	wc                                  *sql.Conn
	beginStmt, commitStmt, rollbackStmt *sql.Stmt
	// wbroken is set when the writer connection's state is unknown (a
	// ROLLBACK failed): the next commit opens a new one first
	wbroken bool
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it if needed) the store in the file at path and
// brings its schema up to date.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Readers <= 0 {
		o.Readers = 4
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	syncWithFdatasync()
	sync := "FULL"
	if o.RelaxedSync {
		sync = "NORMAL"
	}
	dsn := func(readOnly bool) string {
		q := url.Values{}
		for _, p := range []string{"journal_mode(WAL)", "synchronous(" + sync + ")", "busy_timeout(10000)", "foreign_keys(ON)", "temp_store(MEMORY)"} {
			q.Add("_pragma", p)
		}
		if readOnly {
			q.Add("_pragma", "query_only(ON)")
		} else {
			q.Set("_txlock", "immediate")
		}
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	}
	s := &Store{lock: lock}
	fail := func(err error) (*Store, error) {
		s.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	if s.w, err = sql.Open("sqlite", dsn(false)); err != nil {
		return fail(err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	ctx := context.Background()
	if err := s.migrate(ctx); err != nil {
		return fail(err)
	}
	if s.r, err = sql.Open("sqlite", dsn(true)); err != nil {
		return fail(err)
	}
	s.r.SetMaxOpenConns(o.Readers)
	s.r.SetMaxIdleConns(o.Readers)
	if err := s.prepare(ctx); err != nil {
		return fail(err)
	}
	// This process holds the lock: leases of earlier processes are void.
	// Their sessions' attempts stay counted: a process that died holding
	// them did not stop cleanly.
	if _, err := s.wc.ExecContext(ctx, `UPDATE sessions SET lease_owner = '', lease_until = 0 WHERE lease_owner != ''`); err != nil {
		return fail(err)
	}
	// Schedule runs too: the next worker takes them over at once.
	if _, err := s.wc.ExecContext(ctx, `UPDATE schedule_runs SET lease_until = 0 WHERE status = 'pending'`); err != nil {
		return fail(err)
	}
	// Webhook deliveries too.
	if _, err := s.wc.ExecContext(ctx, `UPDATE webhook_deliveries SET lease_owner = '', lease_until = 0 WHERE lease_owner != ''`); err != nil {
		return fail(err)
	}
	return s, nil
}

// syncWithFdatasync has SQLite sync its files with fdatasync(2) instead of
// fsync(2), for the whole process, where the platform has it (Linux and
// the BSDs; elsewhere nothing changes). modernc.org/sqlite is transpiled
// from SQLite's amalgamation without the configure check that makes every
// Linux build of SQLite use fdatasync, so it calls fsync unless told.
// fdatasync writes a file's data and the metadata needed to read it back,
// its size included, before it returns; it leaves out the timestamps.
// SQLite needs no more: a commit written with synchronous = FULL is on
// disk when it returns, as before, and survives a crash or a power loss
// alike. What it saves is the write of the WAL's new mtime, which an
// fsync of a commit waited for whenever the clock had moved on since the
// last (TestCommitsSyncWithFdatasync).
func syncWithFdatasync() {
	if !msqlite.FdatasyncEnabled() {
		msqlite.Fdatasync(true) // ErrFdatasyncUnavailable: fsync stays, as SQLite's own build does there
	}
}

// prepare prepares the statements every operation uses: SQLite parses
// them once per connection instead of once per call. The readers' are
// prepared on their pool; the writer's on its connection (openWriter).
func (s *Store) prepare(ctx context.Context) error {
	var err error
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.getStmt, `SELECT ` + sessionColumns + ` FROM sessions WHERE id = ?`},
		{&s.eventsStmt, `SELECT idx, type, data, time FROM events WHERE session_id = ? AND idx >= ? ORDER BY idx LIMIT ? + 0`},
		{&s.countStmt, `SELECT owner, event_count FROM sessions WHERE id = ?`},
		{&s.messagesStmt, `SELECT data FROM session_messages WHERE session_id = ? AND idx >= ? ORDER BY idx LIMIT ? + 0`},
		{&s.nextWakeStmt, nextWakeSQL},
	} {
		if *p.stmt, err = s.r.PrepareContext(ctx, p.sql); err != nil {
			return err
		}
	}
	return s.openWriter(ctx)
}

// writerStatements are the statements prepared on the writer connection
// (see openWriter).
func (s *Store) writerStatements() []writerStatement {
	ws := []writerStatement{
		{&s.beginStmt, `BEGIN IMMEDIATE`},
		{&s.commitStmt, `COMMIT`},
		{&s.rollbackStmt, `ROLLBACK`},
		{&s.versionStmt, `SELECT version, event_count, lease_owner, lease_until, owner, status, attempts, agent FROM sessions WHERE id = ?`},
		{&s.updateStmt, updateSQL(true, false)},
		{&s.updateSameAgentStmt, updateSQL(false, false)},
		{&s.updateClaimStmt, updateSQL(true, true)},
		{&s.updateClaimSameAgentStmt, updateSQL(false, true)},
		{&s.oneStmt, oneSQL(false)},
		{&s.oneClaimStmt, oneSQL(true)},
		{&s.messageCountStmt, `SELECT coalesce(max(idx) + 1, 0) FROM session_messages WHERE session_id = ?`},
		{&s.trimMessagesStmt, `DELETE FROM session_messages WHERE session_id = ? AND idx >= ?`},
		{&s.claimStmt, `SELECT ` + sessionColumns + ` FROM sessions WHERE rowid = ?`},
		{&s.claimOwnersStmt, claimOwnersSQL},
		{&s.claimWakeStmt, claimWakeSQL},
		{&s.claimBusyStmt, claimBusySQL},
		{&s.claimOwnStmt, claimOwnSQL},
		{&s.takeStmt, `UPDATE sessions SET lease_owner = ?, lease_until = ?, attempts = attempts + 1, claim_token = ? WHERE id = ?`},
		{&s.renewStmt, `UPDATE sessions SET lease_until = ? WHERE id = ? AND lease_owner = ? AND lease_until > ?`},
		{&s.releaseStmt, `UPDATE sessions SET lease_owner = '', lease_until = 0, attempts = 0 WHERE id = ? AND lease_owner = ?`},
		{&s.addTokensStmt, addTokensSQL},
		{&s.countTokensStmt, countTokensSQL},
		{&s.hooksStmt, `SELECT id, events FROM webhooks WHERE owner = ? AND disabled = 0`},
		{&s.insertSessionStmt, `INSERT INTO sessions (` + sessionColumns + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`},
		{&s.byKeyStmt, `SELECT ` + sessionColumns + ` FROM sessions WHERE owner = ? AND idempotency_key = ? AND idempotency_key != ''`},
		{&s.savepointStmt, `SAVEPOINT hrns_write`},
		{&s.rollbackToStmt, `ROLLBACK TO hrns_write`},
		{&s.releaseSavepointStmt, `RELEASE hrns_write`},
	}
	for k := 1; k <= maxInsertRows; k++ {
		ws = append(ws,
			writerStatement{&s.insertEventStmts[k-1], insertSQL(`events (session_id, idx, type, data, time)`, 5, k)},
			writerStatement{&s.insertMessageStmts[k-1], insertSQL(`session_messages (session_id, idx, data)`, 3, k)})
	}
	return ws
}

// writerStatement is a statement of the writer connection and its text.
type writerStatement struct {
	stmt **sql.Stmt
	sql  string
}

// maxInsertRows bounds the rows of one INSERT of events or transcript
// messages: a commit's rows are inserted by as few statements as that
// allows (a step's commit has three to five events and two messages),
// each statement run costing about as much as the row it inserts.
const maxInsertRows = 8

// insertSQL is an INSERT of k rows of n columns into table.
func insertSQL(table string, n, k int) string {
	row := "(?" + strings.Repeat(",?", n-1) + ")"
	return "INSERT INTO " + table + " VALUES " + row + strings.Repeat(","+row, k-1)
}

// insertRows inserts rows rows of n columns with stmts (see
// insertEventStmts), k at a time; args(i, a) appends the i-th row's
// columns to a.
func insertRows(ctx context.Context, tx *writeTx, stmts *[maxInsertRows]*sql.Stmt, rows, n int, args func(i int, a []any) []any) error {
	var a []any
	for from := 0; from < rows; {
		k := min(rows-from, maxInsertRows)
		a = a[:0]
		if a == nil {
			a = make([]any, 0, min(rows, maxInsertRows)*n)
		}
		for i := from; i < from+k; i++ {
			a = args(i, a)
		}
		if _, err := tx.StmtContext(ctx, stmts[k-1]).ExecContext(ctx, a...); err != nil {
			return err
		}
		from += k
	}
	return nil
}

// updateSQL writes a session's mutable fields. SQLite rewrites the
// entries of every index on a column the statement sets, changed or not:
// without agent, used when the agent is the stored one (always, in
// practice), it leaves the agent out so that sessions_by_owner_agent is
// not written at each step. With claim, it is the update of a commit that
// claims the session, taking the lease as Claim does (with the claim's
// token) instead of keeping or releasing it. Its parameters are
// positional, given in order by UpdateSession: the driver looks up a
// numbered parameter's name at every call, allocating a string each.
func updateSQL(agent, claim bool) string {
	q := `UPDATE sessions SET status = ?, `
	if agent {
		q += `agent = ?, `
	}
	q += `first_message = ?, state = ?, answer = ?, error = ?, error_code = ?, runnable = ?, wake_at = ?,
	version = ?, event_count = ?, started_at = ?, finished_at = ?, updated_at = ?, `
	if claim {
		q += `lease_owner = ?, lease_until = ?, attempts = ?, claim_token = ?`
	} else {
		q += `lease_owner = CASE WHEN ? THEN '' ELSE lease_owner END,
	lease_until = CASE WHEN ? THEN 0 ELSE lease_until END,
	attempts = CASE WHEN ? THEN 0 ELSE attempts END`
	}
	return q + ` WHERE id = ?`
}

// oneSQL is updateSQL without agent, for a commit whose decisions are
// made from the caller's session instead of a read of the stored one,
// each checked by the statement (see UpdateSession): it updates the
// session only if it is at the caller's version, event count, owner and
// agent; if the owner is not known to have no webhook, with the status
// unchanged (so no webhook delivery is due); under the caller's lease if
// it has one, else with no lease held when it matters (a session left
// runnable or waiting, not released: workers are woken then); and, with
// claim, if the session can be claimed and has the caller's attempts
// (unless reset), taking the lease with attempts given.
func oneSQL(claim bool) string {
	q := `UPDATE sessions SET status = ?, first_message = ?, state = ?, answer = ?, error = ?, error_code = ?, runnable = ?, wake_at = ?,
	version = version + 1, event_count = event_count + ?, started_at = ?, finished_at = ?, updated_at = ?, `
	if claim {
		q += `lease_owner = ?, lease_until = ?, attempts = ?, claim_token = ?`
	} else {
		q += `lease_owner = CASE WHEN ? THEN '' ELSE lease_owner END,
	lease_until = CASE WHEN ? THEN 0 ELSE lease_until END,
	attempts = CASE WHEN ? THEN 0 ELSE attempts END`
	}
	q += `
	WHERE id = ? AND version = ? AND event_count = ? AND owner = ? AND agent = ? AND (? OR status = ?)`
	if claim {
		q += ` AND (lease_owner = '' OR lease_until <= ?) AND (? OR attempts = ?)`
	} else {
		q += ` AND (? = '' OR lease_owner = ? AND lease_until > ?) AND (? OR lease_owner = '' OR lease_until <= ?)`
	}
	return q
}

func (s *Store) migrate(ctx context.Context) error {
	var version int
	if err := s.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for i, name := range names {
		if i < version {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	if version > len(names) {
		return fmt.Errorf("schema version %d is newer than this program's %d", version, len(names))
	}
	return nil
}

// Close closes the database and releases the file lock.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.wmu.Lock()
		s.wclosed = true
		var drained chan struct{}
		if s.leading {
			drained = make(chan struct{})
			s.wdrained = drained
		}
		s.wmu.Unlock()
		if drained != nil {
			<-drained // the writes in flight end (each commit's own bound)
		}
		var errs []error
		for _, st := range []*sql.Stmt{s.getStmt, s.eventsStmt, s.countStmt, s.messagesStmt, s.nextWakeStmt} {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
		errs = append(errs, s.closeWriter(false))
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		if s.lock != nil {
			errs = append(errs, s.lock.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

const sessionColumns = `id, owner, idempotency_key, request_hash, status, agent, first_message, request, state, answer,
	error, error_code, runnable, wake_at, lease_owner, lease_until, attempts, version, event_count,
	created_at, started_at, finished_at, updated_at, group_id, parent_id, schedule_id`

type scanner interface{ Scan(...any) error }

// collect scans every row of rows with scan, and closes rows: how the
// lists and claims of every table read their rows.
func collect[T any](rows *sql.Rows, scan func(scanner) (*T, error)) ([]*T, error) {
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanSession(sc scanner) (*store.Session, error) {
	var (
		s                                                     store.Session
		runnable                                              int
		wake, leaseUntil, created, started, finished, updated int64
		request, state, answer                                []byte
	)
	err := sc.Scan(&s.ID, &s.Owner, &s.IdempotencyKey, &s.RequestHash, &s.Status, &s.Agent, &s.FirstMessage,
		&request, &state, &answer, &s.Error, &s.ErrorCode, &runnable, &wake, &s.LeaseOwner, &leaseUntil,
		&s.Attempts, &s.Version, &s.EventCount, &created, &started, &finished, &updated, &s.GroupID, &s.ParentID, &s.ScheduleID)
	if err != nil {
		return nil, err
	}
	s.Request, s.State, s.Answer = request, state, answer
	s.Runnable = runnable != 0
	s.WakeAt, s.LeaseUntil = fromNanos(wake), fromNanos(leaseUntil)
	s.CreatedAt, s.StartedAt, s.FinishedAt, s.UpdatedAt = fromNanos(created), fromNanos(started), fromNanos(finished), fromNanos(updated)
	return &s, nil
}

// nanos is t as stored: Unix nanoseconds, 0 for the zero time, and a time
// past what they hold (after 2262, before 1678) the greatest or least of
// them (filterNanos), never wrapped: an idle session's wake time centuries
// away was stored in 1727, so it was due at once, claimed and put back,
// over and over.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return filterNanos(t)
}

// asStored gives the times of s and events the precision and location
// they are read back with, and the events' missing data the null stored
// (see [store.UpdateOptions.Committed]).
func asStored(s *store.Session, events []store.Event) {
	for _, t := range []*time.Time{&s.CreatedAt, &s.StartedAt, &s.FinishedAt, &s.UpdatedAt, &s.WakeAt, &s.LeaseUntil} {
		*t = fromNanos(nanos(*t))
	}
	for i := range events {
		e := &events[i]
		e.Time = fromNanos(nanos(e.Time))
		if e.Data == nil {
			e.Data = json.RawMessage("null")
		}
	}
}

// filterNanos is t in Unix nanoseconds for a comparison with stored
// times, which all fit: a time before or after what int64 nanoseconds hold
// (1678 to 2262) becomes the least or greatest of them, which compares
// with every stored time as t does. (t.UnixNano overflows there: a filter
// created_after=2300-01-01 matched every session.)
func filterNanos(t time.Time) int64 {
	switch {
	case t.Before(minNanosTime):
		return math.MinInt64
	case t.After(maxNanosTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// The least and greatest times of int64 Unix nanoseconds.
var minNanosTime, maxNanosTime = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// blob keeps nil documents NULL and copies the others, since the driver
// may keep them until the statement is done.
func blob(b []byte) any {
	if b == nil {
		return nil
	}
	return []byte(b)
}

// CreateSession implements [store.Store].
func (s *Store) CreateSession(ctx context.Context, sess *store.Session, events []store.Event) (*store.Session, bool, error) {
	now := time.Now().UTC()
	n := *sess
	if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.Version = 1
	n.EventCount = int64(len(events))
	n.Attempts = 0
	if n.LeaseOwner == "" || !n.Runnable {
		n.LeaseOwner, n.LeaseUntil = "", time.Time{}
	} else {
		n.Attempts = 1 // created claimed
	}
	var existing *store.Session
	var hooked bool
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		if n.IdempotencyKey != "" {
			row := tx.StmtContext(ctx, s.byKeyStmt).QueryRowContext(ctx, n.Owner, n.IdempotencyKey)
			got, err := scanSession(row)
			switch {
			case err == nil:
				existing = got
				return nil
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		_, err := tx.StmtContext(ctx, s.insertSessionStmt).ExecContext(ctx,
			n.ID, n.Owner, n.IdempotencyKey, n.RequestHash, n.Status, n.Agent, n.FirstMessage,
			blob(n.Request), blob(n.State), blob(n.Answer), n.Error, n.ErrorCode, boolInt(n.Runnable), nanos(n.WakeAt),
			n.LeaseOwner, nanos(n.LeaseUntil), n.Attempts, n.Version, n.EventCount, nanos(n.CreatedAt), nanos(n.StartedAt), nanos(n.FinishedAt), nanos(n.UpdatedAt),
			n.GroupID, n.ParentID, n.ScheduleID)
		if err != nil {
			return err
		}
		if err := s.insertEvents(ctx, tx, n.ID, 0, events, now); err != nil {
			return err
		}
		hooked, err = s.enqueueDeliveries(ctx, tx, n.Owner, n.ID, "", n.Status, n.Version, now)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("create session: %w", err)
	}
	if existing != nil {
		return existing, false, nil
	}
	s.hub.Notify(n.ID)
	if hooked {
		s.hub.Notify(store.WebhookTopic)
	}
	if (n.Runnable || !n.WakeAt.IsZero()) && n.LeaseOwner == "" {
		s.hub.Notify(store.WorkTopic)
	}
	return &n, true, nil
}

func (s *Store) insertEvents(ctx context.Context, tx *writeTx, id string, from int64, events []store.Event, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	for i := range events {
		e := &events[i]
		e.Index = from + int64(i)
		if e.Time.IsZero() {
			e.Time = now
		}
	}
	return insertRows(ctx, tx, &s.insertEventStmts, len(events), 5, func(i int, a []any) []any {
		e := &events[i]
		data := e.Data
		if data == nil {
			data = []byte("null")
		}
		return append(a, id, e.Index, e.Type, []byte(data), nanos(e.Time))
	})
}

// writeTranscript applies t to the session's transcript: the messages
// from t.From on are deleted (none when it appends) and t's inserted.
func (s *Store) writeTranscript(ctx context.Context, tx *writeTx, id string, t *store.Transcript) error {
	if t == nil {
		return nil
	}
	var stored int64
	if err := tx.StmtContext(ctx, s.messageCountStmt).QueryRowContext(ctx, id).Scan(&stored); err != nil {
		return err
	}
	if t.From < 0 || t.From > stored {
		return fmt.Errorf("%w: from %d, %d stored", store.ErrTranscriptGap, t.From, stored)
	}
	if t.From < stored {
		if _, err := tx.StmtContext(ctx, s.trimMessagesStmt).ExecContext(ctx, id, t.From); err != nil {
			return err
		}
	}
	return insertRows(ctx, tx, &s.insertMessageStmts, len(t.Messages), 3, func(i int, a []any) []any {
		m := t.Messages[i]
		if m == nil {
			m = json.RawMessage("null")
		}
		return append(a, id, t.From+int64(i), []byte(m))
	})
}

// Messages implements [store.Store].
func (s *Store) Messages(ctx context.Context, id string, from int64, limit int) ([]json.RawMessage, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.messagesStmt.QueryContext(ctx, id, from, limit)
	if err != nil {
		return nil, fmt.Errorf("messages: %w", s.wrap(err))
	}
	defer rows.Close()
	var out []json.RawMessage
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
		out = append(out, data)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	if len(out) == 0 {
		if err := s.sessionExists(ctx, id, "messages"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sessionExists tells an empty read of session id's rows from a read of
// a session that does not exist: it returns store.ErrNotFound for one, and
// an error of the store prefixed with what, the read's name.
func (s *Store) sessionExists(ctx context.Context, id, what string) error {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return fmt.Errorf("%s: %w", what, s.wrap(err))
	}
	return nil
}

func (s *Store) wrap(err error) error {
	if err != nil && strings.Contains(err.Error(), "database is closed") {
		return fmt.Errorf("%w: %w", store.ErrClosed, err)
	}
	return err
}

// GetSession implements [store.Store].
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	got, err := scanSession(s.getStmt.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", s.wrap(err))
	}
	return got, nil
}

// ListSessions implements [store.Store].
func (s *Store) ListSessions(ctx context.Context, p *store.ListParams) ([]*store.Session, int, error) {
	where := `owner = ?`
	args := []any{p.Owner}
	in := func(col string, vals []string) {
		if len(vals) > 0 {
			where += ` AND ` + col + ` IN (` + strings.TrimSuffix(strings.Repeat("?,", len(vals)), ",") + `)`
			for _, v := range vals {
				args = append(args, v)
			}
		}
	}
	in("status", p.Statuses)
	in("agent", p.Agents)
	for _, f := range []struct{ col, v string }{{"group_id", p.GroupID}, {"parent_id", p.ParentID}, {"schedule_id", p.ScheduleID}} {
		if f.v != "" {
			where += ` AND ` + f.col + ` = ?`
			args = append(args, f.v)
		}
	}
	for _, f := range []struct {
		cond string
		t    time.Time
	}{{"created_at > ?", p.CreatedAfter}, {"created_at < ?", p.CreatedBefore}, {"finished_at != 0 AND finished_at > ?", p.FinishedAfter}, {"finished_at != 0 AND finished_at < ?", p.FinishedBefore}} {
		if !f.t.IsZero() {
			where += ` AND ` + f.cond
			args = append(args, filterNanos(f.t))
		}
	}
	if p.Search != "" {
		// Bounded by the owner's index range: no scan of other owners.
		pat := "%" + likeEscaper.Replace(strings.ToLower(p.Search)) + "%"
		where += ` AND (lower(first_message) LIKE ? ESCAPE '\' OR lower(CAST(answer AS TEXT)) LIKE ? ESCAPE '\')`
		args = append(args, pat, pat)
	}
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	order := "DESC"
	if p.Ascending {
		order = "ASC"
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE `+where+
		` ORDER BY created_at `+order+`, id `+order+` LIMIT ? + 0 OFFSET ? + 0`, append(args, limit, max(p.Offset, 0))...)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", s.wrap(err))
	}
	out, err := collect(rows, scanSession)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", s.wrap(err))
	}
	return out, total, nil
}

// likeEscaper escapes the wildcards of LIKE.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// UpdateSession implements [store.Store].
func (s *Store) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	var o store.UpdateOptions
	if opts != nil {
		o = *opts
	}
	if o.Tokens != nil && o.Tokens.N < 0 {
		return fmt.Errorf("update session %s: %w", sess.ID, store.ErrNegativeTokens)
	}
	if o.Claim != nil && (o.Lease != "" || o.Release) {
		return fmt.Errorf("update session %s: %w", sess.ID, store.ErrClaimWithLease)
	}
	now := time.Now().UTC()
	var count int64
	var hooked bool
	var claimed bool
	var attempts int
	var leaseFree bool // no one holds the lease after the update
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		var version, leaseUntil int64
		var owner, status, agent, leaseOwner string
		// First the update in one statement (oneSQL), decided from the
		// caller's session, which is usually as stored: it applies when
		// the stored session is as the caller's in everything the
		// decisions below depend on, so it decides as they would. When
		// it changes nothing, the session is read and the update decided
		// from what was read.
		c := o.Claim
		claim := c != nil && sess.Runnable
		attempts = sess.Attempts // as the claim counts them
		if o.ResetAttempts {
			attempts = 0
		}
		if !s.slowUpdates && (!claim || c.BelowAttempts <= 0 || attempts < c.BelowAttempts) {
			update := s.oneStmt
			if claim {
				update = s.oneClaimStmt
			}
			args := make([]any, 0, 27)
			args = append(args, sess.Status, sess.FirstMessage, blob(sess.State), blob(sess.Answer), sess.Error, sess.ErrorCode, boolInt(sess.Runnable), nanos(sess.WakeAt),
				len(events), nanos(sess.StartedAt), nanos(sess.FinishedAt), nanos(now))
			if claim {
				args = append(args, c.Owner, nanos(c.Now.Add(c.TTL)), attempts+1, c.Token)
			} else {
				args = append(args, o.Release, o.Release, o.Release || o.ResetAttempts)
			}
			args = append(args, sess.ID, sess.Version, sess.EventCount, sess.Owner, sess.Agent, s.knownHookless(sess.Owner), sess.Status)
			if claim {
				args = append(args, nanos(c.Now), o.ResetAttempts, sess.Attempts)
			} else {
				// Whether the lease, when no one holds it, wakes no one.
				wakesNone := o.Release || o.Lease != "" || !sess.Runnable && sess.WakeAt.IsZero()
				args = append(args, o.Lease, o.Lease, now.UnixNano(), wakesNone, now.UnixNano())
			}
			res, err := tx.StmtContext(ctx, update).ExecContext(ctx, args...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if s.oneHook != nil {
				s.oneHook(n == 1)
			}
			if n == 1 {
				count, claimed = sess.EventCount, claim
				leaseFree = !claim && (o.Release || o.Lease == "")
				// No webhook delivery is due (see oneSQL).
				return s.updated(ctx, tx, sess, events, &o, sess.Owner, count, now)
			}
		}
		err := tx.StmtContext(ctx, s.versionStmt).QueryRowContext(ctx, sess.ID).Scan(&version, &count, &leaseOwner, &leaseUntil, &owner, &status, &attempts, &agent)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if o.Lease != "" && (leaseOwner != o.Lease || leaseUntil <= now.UnixNano()) {
			return store.ErrLeaseLost
		}
		if version != sess.Version {
			return store.ErrConflict
		}
		if o.ResetAttempts {
			attempts = 0
		}
		// A claim takes the lease in the update's own statement.
		claimed = c != nil && sess.Runnable && (leaseOwner == "" || leaseUntil <= nanos(c.Now)) && (c.BelowAttempts <= 0 || attempts < c.BelowAttempts)
		var update *sql.Stmt
		switch {
		case claimed && agent == sess.Agent:
			update = s.updateClaimSameAgentStmt
		case claimed:
			update = s.updateClaimStmt
		case agent == sess.Agent:
			update = s.updateSameAgentStmt
		default:
			update = s.updateStmt
		}
		args := make([]any, 0, 20)
		args = append(args, sess.Status)
		if agent != sess.Agent {
			args = append(args, sess.Agent)
		}
		args = append(args, sess.FirstMessage, blob(sess.State), blob(sess.Answer), sess.Error, sess.ErrorCode, boolInt(sess.Runnable), nanos(sess.WakeAt),
			version+1, count+int64(len(events)), nanos(sess.StartedAt), nanos(sess.FinishedAt), nanos(now))
		if claimed {
			args = append(args, c.Owner, nanos(c.Now.Add(c.TTL)), attempts+1, c.Token)
		} else {
			args = append(args, o.Release, o.Release, o.Release || o.ResetAttempts)
		}
		args = append(args, sess.ID)
		if _, err := tx.StmtContext(ctx, update).ExecContext(ctx, args...); err != nil {
			return err
		}
		if err := s.updated(ctx, tx, sess, events, &o, owner, count, now); err != nil {
			return err
		}
		leaseFree = o.Release || !claimed && (leaseOwner == "" || leaseUntil <= now.UnixNano())
		hooked, err = s.enqueueDeliveries(ctx, tx, owner, sess.ID, status, sess.Status, version+1, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("update session %s: %w", sess.ID, err)
	}
	if hooked {
		s.hub.Notify(store.WebhookTopic)
	}
	sess.Version++
	sess.EventCount = count + int64(len(events))
	sess.UpdatedAt = now
	if o.Release {
		sess.LeaseOwner, sess.LeaseUntil = "", time.Time{}
	}
	if o.Release || o.ResetAttempts {
		sess.Attempts = 0
	}
	if claimed {
		sess.LeaseOwner, sess.LeaseUntil, sess.Attempts = o.Claim.Owner, fromNanos(nanos(o.Claim.Now.Add(o.Claim.TTL))), attempts+1
	}
	if o.Committed != nil {
		asStored(sess, events)
		o.Committed(sess, events)
	}
	s.hub.Notify(sess.ID)
	// Workers are woken when the lease is free (or expired) after the
	// update: a claim, or a lease its holder keeps, is its holder's to run.
	if (sess.Runnable || !sess.WakeAt.IsZero()) && leaseFree {
		s.hub.Notify(store.WorkTopic)
	}
	return nil
}

// updated writes the rest of UpdateSession's commit, after the session's
// row: its request if asked, its events from count on, its transcript and
// its tokens.
func (s *Store) updated(ctx context.Context, tx *writeTx, sess *store.Session, events []store.Event, o *store.UpdateOptions, owner string, count int64, now time.Time) error {
	if o.WriteRequest {
		// Rare (a re-encryption): its own statement, so that the
		// one of every commit stays as it is.
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET request = ? WHERE id = ?`, blob(sess.Request), sess.ID); err != nil {
			return err
		}
	}
	if err := s.insertEvents(ctx, tx, sess.ID, count, events, now); err != nil {
		return err
	}
	if err := s.writeTranscript(ctx, tx, sess.ID, o.Transcript); err != nil {
		return err
	}
	if t := o.Tokens; t != nil && t.N > 0 {
		if _, err := tx.StmtContext(ctx, s.countTokensStmt).ExecContext(ctx, owner, t.Period, windowNanos(t.Start), t.N); err != nil {
			return err
		}
	}
	return nil
}

// EventCount implements [store.Store].
func (s *Store) EventCount(ctx context.Context, id string) (string, int64, error) {
	var owner string
	var count int64
	err := s.countStmt.QueryRowContext(ctx, id).Scan(&owner, &count)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, store.ErrNotFound
	}
	if err != nil {
		return "", 0, fmt.Errorf("event count: %w", s.wrap(err))
	}
	return owner, count, nil
}

// Events implements [store.Store].
func (s *Store) Events(ctx context.Context, id string, from int64, limit int) ([]store.Event, error) {
	return s.EventsWithin(ctx, id, from, limit, 0)
}

// EventIndexes implements [store.Store].
func (s *Store) EventIndexes(ctx context.Context, id, typ string) ([]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT idx FROM events WHERE session_id = ? AND type = ? ORDER BY idx`, id, typ)
	if err != nil {
		return nil, fmt.Errorf("event indexes: %w", s.wrap(err))
	}
	defer rows.Close()
	out := []int64{}
	for rows.Next() {
		var i int64
		if err := rows.Scan(&i); err != nil {
			return nil, fmt.Errorf("event indexes: %w", err)
		}
		out = append(out, i)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("event indexes: %w", err)
	}
	if len(out) == 0 {
		if err := s.sessionExists(ctx, id, "event indexes"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// EventsWithin implements [store.Store]: rows are read one at a time, and
// the read stops at the budget.
func (s *Store) EventsWithin(ctx context.Context, id string, from int64, limit int, maxBytes int64) ([]store.Event, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.eventsStmt.QueryContext(ctx, id, from, limit)
	if err != nil {
		return nil, fmt.Errorf("events: %w", s.wrap(err))
	}
	defer rows.Close()
	var out []store.Event
	var read int64
	for rows.Next() {
		var e store.Event
		var data []byte
		var t int64
		if err := rows.Scan(&e.Index, &e.Type, &data, &t); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		e.Data, e.Time = data, fromNanos(t)
		out = append(out, e)
		if read += int64(len(data)); maxBytes > 0 && read >= maxBytes {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if len(out) == 0 {
		if err := s.sessionExists(ctx, id, "events"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Claim implements [store.Store]: fairly across owners (see
// [store.Store.Claim]). It lists the owners with runnable sessions
// (claimOwnersSQL), and for each counts its sessions leased and reads
// its oldest free ones (claimBusySQL, claimOwnSQL, on the owner's
// indexes), the waiting sessions whose time has come read beside them
// (claimWakeSQL) and counted with their owner's; then it takes the
// candidates by rank: each owner's in turn, the owner running fewest
// first.
func (s *Store) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	limit := max(p.Limit, 1)
	now := nanos(p.Now)
	until := nanos(p.Now.Add(p.TTL))
	var out []*store.Session
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		out = nil
		type cand struct {
			rowid, created int64
		}
		byOwner := map[string][]cand{}
		var owners []string
		rows, err := tx.StmtContext(ctx, s.claimOwnersStmt).QueryContext(ctx)
		if err != nil {
			return err
		}
		for rows.Next() {
			var o string
			if err := rows.Scan(&o); err != nil {
				rows.Close()
				return err
			}
			owners = append(owners, o)
			byOwner[o] = nil
		}
		if err := rows.Close(); err != nil {
			return err
		}
		// The waiting sessions whose time has come: their oldest limit,
		// across owners, as before (few wait so at once).
		if rows, err = tx.StmtContext(ctx, s.claimWakeStmt).QueryContext(ctx, now, limit, p.BelowAttempts); err != nil {
			return err
		}
		for rows.Next() {
			var o string
			var c cand
			if err := rows.Scan(&c.rowid, &o, &c.created); err != nil {
				rows.Close()
				return err
			}
			if _, ok := byOwner[o]; !ok {
				owners = append(owners, o)
			}
			byOwner[o] = append(byOwner[o], c)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		busyStmt, ownStmt := tx.StmtContext(ctx, s.claimBusyStmt), tx.StmtContext(ctx, s.claimOwnStmt)
		var ranked []rankedCand
		for _, o := range owners {
			var busy int64
			if err := busyStmt.QueryRowContext(ctx, o, now).Scan(&busy); err != nil {
				return err
			}
			cands := byOwner[o]
			rows, err := ownStmt.QueryContext(ctx, o, now, limit, p.BelowAttempts)
			if err != nil {
				return err
			}
			for rows.Next() {
				var c cand
				if err := rows.Scan(&c.rowid, &c.created); err != nil {
					rows.Close()
					return err
				}
				cands = append(cands, c)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			slices.SortFunc(cands, func(a, b cand) int {
				if a.created != b.created {
					return cmp.Compare(a.created, b.created)
				}
				return cmp.Compare(a.rowid, b.rowid)
			})
			cands = slices.CompactFunc(cands, func(a, b cand) bool { return a.rowid == b.rowid })
			for i, c := range cands[:min(limit, len(cands))] {
				ranked = append(ranked, rankedCand{rank: busy + int64(i), created: c.created, rowid: c.rowid})
			}
		}
		// Each owner's in turn: by rank, then the oldest.
		slices.SortFunc(ranked, func(a, b rankedCand) int {
			return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.created, b.created), cmp.Compare(a.rowid, b.rowid))
		})
		get, take := tx.StmtContext(ctx, s.claimStmt), tx.StmtContext(ctx, s.takeStmt)
		for _, r := range ranked[:min(limit, len(ranked))] {
			got, err := scanSession(get.QueryRowContext(ctx, r.rowid))
			if err != nil {
				return err
			}
			if _, err := take.ExecContext(ctx, p.Owner, until, p.Token, got.ID); err != nil {
				return err
			}
			got.LeaseOwner, got.LeaseUntil = p.Owner, fromNanos(until)
			got.Attempts++
			out = append(out, got)
		}
		slices.SortFunc(out, store.CompareCreated)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}

// RecoverClaim implements [store.Store].
func (s *Store) RecoverClaim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if p.Token == "" {
		return nil, nil
	}
	until := nanos(p.Now.Add(p.TTL))
	var out []*store.Session
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		rows, err := tx.QueryContext(ctx, recoverClaimSQL, until, p.Token, p.Owner)
		if err != nil {
			return err
		}
		out, err = collect(rows, scanSession)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recover claim: %w", err)
	}
	slices.SortFunc(out, store.CompareCreated)
	return out, nil
}

// recoverClaimSQL extends the leases the claim of token ?2 (of owner ?3)
// took and holds still, found on sessions_by_claim_token (whose
// condition the statement repeats, so that SQLite may use it).
const recoverClaimSQL = `UPDATE sessions SET lease_until = ?1
			WHERE claim_token = ?2 AND claim_token != '' AND lease_owner = ?3
			RETURNING ` + sessionColumns

// rankedCand is a session Claim may take and its turn: the count of its
// owner's sessions running plus its place among the owner's free ones
// (as store.RankedDelivery is a delivery's).
type rankedCand struct {
	rank, created, rowid int64
}

// The statements of Claim. Each reads a partial index in its order and
// stops at its limit: reading every runnable session (or merging whole
// rows of them) made each claim cost as much as the whole backlog, so a
// burst of sessions created faster than the workers took them cost time
// quadratic in its size.
const (
	// claimOwnersSQL lists the owners with runnable sessions: a skip
	// scan of sessions_runnable_by_owner, one search per owner, however
	// many sessions each has.
	claimOwnersSQL = `WITH RECURSIVE o(owner) AS (
			SELECT (SELECT owner FROM sessions INDEXED BY sessions_runnable_by_owner WHERE runnable = 1 ORDER BY owner LIMIT 1)
			UNION ALL
			SELECT (SELECT s.owner FROM sessions AS s INDEXED BY sessions_runnable_by_owner
				WHERE s.runnable = 1 AND s.owner > o.owner ORDER BY s.owner LIMIT 1)
			FROM o WHERE o.owner IS NOT NULL)
		SELECT owner FROM o WHERE owner IS NOT NULL`
	// claimWakeSQL: the oldest ?2 free sessions whose wake-up time has
	// come.
	claimWakeSQL = `SELECT rowid, owner, created_at FROM sessions INDEXED BY sessions_wake
		WHERE wake_at != 0 AND wake_at <= ?1 AND (lease_owner = '' OR lease_until <= ?1) AND (?3 <= 0 OR attempts < ?3)
		ORDER BY created_at, rowid LIMIT ?2 + 0`
	// claimBusySQL counts an owner's runnable sessions whose lease is
	// live (those running), on sessions_leased_by_owner.
	claimBusySQL = `SELECT COUNT(*) FROM sessions INDEXED BY sessions_leased_by_owner
		WHERE owner = ?1 AND runnable = 1 AND lease_owner != '' AND lease_until > ?2`
	// claimOwnSQL: an owner's oldest ?3 free runnable sessions, on
	// sessions_runnable_by_owner in its order.
	claimOwnSQL = `SELECT rowid, created_at FROM sessions INDEXED BY sessions_runnable_by_owner
		WHERE owner = ?1 AND runnable = 1 AND (lease_owner = '' OR lease_until <= ?2) AND (?4 <= 0 OR attempts < ?4)
		ORDER BY created_at, rowid LIMIT ?3 + 0`
)

// Renew implements [store.Store].
func (s *Store) Renew(ctx context.Context, id, owner string, until time.Time) error {
	now := time.Now().UnixNano()
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.StmtContext(ctx, s.renewStmt).ExecContext(ctx, nanos(until), id, owner, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		return store.ErrLeaseLost
	})
	if err != nil {
		return fmt.Errorf("renew lease of %s: %w", id, err)
	}
	return nil
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, id, owner string) error {
	var released bool
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.StmtContext(ctx, s.releaseStmt).ExecContext(ctx, id, owner)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			released = true
			return nil
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", id, err)
	}
	if released {
		s.hub.Notify(store.WorkTopic)
	}
	return nil
}

// NextWake implements [store.Store].
func (s *Store) NextWake(ctx context.Context, now time.Time) (time.Time, error) {
	n := nanos(now)
	var next sql.NullInt64
	// The next moment a session becomes claimable: a leased runnable
	// session when its lease ends; a waiting one at its wake time, or
	// when its lease ends if that is later. Two halves, each on its
	// partial index (an OR would scan every session).
	err := s.nextWakeStmt.QueryRowContext(ctx, n).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next wake: %w", s.wrap(err))
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return fromNanos(next.Int64), nil
}

// nextWakeSQL finds the next moment a session becomes claimable.
const nextWakeSQL = `SELECT MIN(t) FROM (
			SELECT lease_until AS t FROM sessions
			WHERE runnable = 1 AND lease_owner != '' AND lease_until > ?1
			UNION ALL
			SELECT CASE WHEN lease_owner != '' AND lease_until > ?1 AND lease_until > wake_at THEN lease_until ELSE wake_at END
			FROM sessions
			WHERE wake_at != 0 AND runnable = 0)`

// Subscribe implements [store.Store].
func (s *Store) Subscribe(topic string) (<-chan struct{}, func()) {
	return s.hub.Subscribe(topic)
}
