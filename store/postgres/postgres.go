// Package postgres implements [store.Store] in a PostgreSQL database with
// pgx v5, for several hrns serve processes (replicas) sharing one database.
//
//	st, err := postgres.Open(ctx, "postgres://hrns@db:5432/hrns?search_path=hrns", nil)
//	if err != nil { ... }
//	defer st.Close()
//
// # Schema and migrations
//
// The store's tables (hrns_sessions, hrns_events, hrns_replicas and
// hrns_migrations) live in the first schema of the connection's
// search_path: set it with the DSN's search_path parameter (default: the
// server's, usually public). Open creates that schema if it is missing,
// then applies the SQL files embedded from migrations/ that the database
// has not seen, each in its own transaction, all while holding a
// PostgreSQL advisory lock (pg_advisory_lock): when several replicas start
// at once, one migrates and the others wait, then find nothing to do. A
// database migrated by a newer program is refused.
//
// # Leases and clocks
//
// Replicas own sessions through leases ([store.Store.Claim], Renew,
// Release) whose times come from the replicas' clocks, as the interface
// passes them: keep the clocks in sync (NTP) to well under the lease TTL.
// Claim locks the rows it takes (SELECT ... FOR UPDATE) and waits for a
// concurrent claim of the same rows instead of skipping them: a replica
// that claims nothing then sees the other's lease when it asks
// [store.Store.NextWake], and wakes up when that lease expires.
//
// # Wake-ups across replicas
//
// Every commit that changes a session is announced once it has returned
// (so never before it is visible): at once to the subscribers of this
// process ([store.Store.Subscribe]), and to the other processes by a
// notification on the store's channel, hrns_ followed by the schema name.
// The commits do not notify in their own transaction: PostgreSQL
// serialises the commits of transactions that notify (each holds a
// server-wide lock on the notify queue until it is durable), which made
// every commit of the store wait for the others'. Instead each Store has
// a notifier, a connection of its own that sends the notifications
// pending, coalesced (one per session, however many commits changed it),
// in one statement, the next batch gathering while one is sent; it does
// not wait for its commits to be flushed (synchronous_commit off), so it
// holds the lock a moment. Each Store also holds one connection that
// LISTENs on the channel and fans the other processes' notifications out
// to the subscribers of its process: a long-poll held by one replica
// wakes up as soon as another commits, with no polling.
//
// The payload is the session's id, marked when the change may give
// workers something to claim (the session is runnable or has a wake-up
// time, and no live lease holds it; or a lease was released): only those
// wake the workers of every replica. The notifications pending are
// bounded (4096); past that the notifier sends one that wakes every
// subscriber of the other processes instead.
//
// A wake-up is not lost when a connection is:
//   - the notifier that loses its connection sends its batch again on a
//     new one;
//   - a process that dies between a commit and its notification (or whose
//     notifier's connection breaks for good) leaves no notifier behind:
//     every Store looks each second for the other processes' notifiers
//     (by their application_name in pg_stat_activity; each also says
//     hello when it connects, before its process commits anything) and
//     wakes every subscriber of its process when one it knew is gone, so
//     such a commit is announced within about a second of PostgreSQL
//     seeing the connection closed (at once when the process dies; when
//     its machine or the network does, only once TCP gives up, and the
//     session runtime's own re-reads bound the delay: a long-poll ends
//     within 25 s and is polled again, a stream re-reads every 15 s, a
//     dispatcher looks for work every lease TTL);
//   - a change whose commit is uncertain (the statement's answer was
//     lost) is announced a second later, in case it was committed;
//   - when the listening connection is lost, the store reconnects and
//     then notifies every subscriber of the process, since changes
//     committed meanwhile went unannounced; a quiet connection is pinged
//     every minute to find one that died silently.
//
// Close sends what the notifier holds before it returns (for up to 5
// seconds).
//
// # Connections
//
// A Store holds a pgxpool pool (its size: the DSN's pool_max_conns, or
// Options.MaxConns, else pgxpool's default, the larger of 4 and the CPU
// count) and two more connections, the listener and the notifier. Statements are prepared
// and cached per connection (pgx's default), and LISTEN needs a session
// of its own: connect to PostgreSQL directly or through a pooler in
// session mode, not transaction mode. The stores find one another's
// notifiers by their application_name: a pooler that does not pass it on
// leaves a process's death covered only by the runtime's re-reads.
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/internal/wake"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure a [Store]. A nil *Options means the defaults.
type Options struct {
	// MaxConns bounds the pool's connections; 0 means the DSN's
	// pool_max_conns, or pgxpool's default. The listening and the
	// notifying connections come on top.
	MaxConns int32
	// Logger receives the listener's and the notifier's reconnections;
	// nil discards them.
	Logger *slog.Logger
}

// Store is a [store.Store] in a PostgreSQL database, and a
// [store.Replicas].
type Store struct {
	// fixed at creation
	pool       *pgxpool.Pool
	connConfig *pgx.ConnConfig // of the listening connection
	schema     string
	channel    string
	log        *slog.Logger
	hub        wake.Hub
	pingEvery  time.Duration
	// how often to look for other processes' notifiers gone (watchPeers)
	peerCheckEvery time.Duration
	stopListen     context.CancelFunc
	listenDone     chan struct{}
	notifier       *notifier // sends this process's notifications
	stopPeers      context.CancelFunc
	peersDone      chan struct{}

	peers     peers // the other processes' notifiers
	closed    atomic.Bool
	closeOnce sync.Once
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Replicas = (*Store)(nil)
)

// Open connects to the database of the DSN (a postgres:// URL or a
// key=value string, as pgx reads it), brings its schema up to date and
// starts listening for changes. It returns once the listener listens, so
// that no change committed after a [Store.Subscribe] goes unannounced.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	s := &Store{connConfig: cfg.ConnConfig.Copy(), log: o.Logger, pingEvery: pingEvery, peerCheckEvery: time.Duration(testPeerCheckEvery.Load()), listenDone: make(chan struct{})}
	if s.peerCheckEvery <= 0 {
		s.peerCheckEvery = peerCheckEvery
	}
	fail := func(err error) (*Store, error) {
		if s.pool != nil {
			s.pool.Close()
		}
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fail(err)
	}
	if s.schema, err = s.migrate(ctx, cfg.ConnConfig.RuntimeParams["search_path"]); err != nil {
		return fail(err)
	}
	s.channel = channelName(s.schema)
	conn, err := s.connectListener(ctx)
	if err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	if s.notifier, err = newNotifier(ctx, s.connConfig, s.channel, s.log); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fail(fmt.Errorf("notifier: %w", err))
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.stopListen = cancel
	go s.listen(lctx, conn)
	s.lookAtPeers(ctx)
	pctx, cancel := context.WithCancel(context.Background())
	s.stopPeers, s.peersDone = cancel, make(chan struct{})
	go s.watchPeers(pctx, s.peerCheckEvery)
	return s, nil
}

// Schema returns the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// Close stops listening and closes the connections, after the calls in
// progress end and the notifications of their commits are sent (for up
// to 5 seconds). Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stopListen()
		<-s.listenDone
		s.stopPeers()
		<-s.peersDone
		s.pool.Close()
		s.notifier.close()
	})
	return nil
}

// migrate creates the schema the search path names first if it is
// missing, applies the migrations the database has not seen, and returns
// the schema the tables are in. It holds an advisory lock while it works,
// so that replicas starting at once migrate one after the other.
func (s *Store) migrate(ctx context.Context, searchPath string) (schema string, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	key := lockKey(searchPath)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return "", fmt.Errorf("lock for migrations: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); uerr != nil {
			// The lock dies with the connection.
			conn.Conn().Close(uctx)
		}
	}()
	if name := firstSchema(searchPath); name != "" {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, name).Scan(&exists); err != nil {
			return "", err
		}
		if !exists {
			if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{name}.Sanitize()); err != nil {
				return "", fmt.Errorf("create schema %s: %w", name, err)
			}
		}
	}
	var current *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return "", err
	}
	if current == nil {
		return "", fmt.Errorf("no schema to create the tables in: search_path %q names none that exists", searchPath)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS hrns_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return "", fmt.Errorf("create hrns_migrations: %w", err)
	}
	var version int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM hrns_migrations`).Scan(&version); err != nil {
		return "", err
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return "", err
	}
	slices.Sort(names)
	if version > len(names) {
		return "", fmt.Errorf("schema %s is at version %d, newer than this program's %d", *current, version, len(names))
	}
	for i, name := range names[version:] {
		body, err := migrations.ReadFile(name)
		if err != nil {
			return "", err
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO hrns_migrations (version, name) VALUES ($1, $2)`, version+i+1, strings.TrimPrefix(name, "migrations/"))
			return err
		})
		if err != nil {
			return "", fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return *current, nil
}

// lockKey is the advisory lock of the migrations of the schema the search
// path selects.
func lockKey(searchPath string) int64 {
	h := fnv.New64a()
	h.Write([]byte("hrns migrations\x00" + searchPath))
	return int64(h.Sum64())
}

// firstSchema returns the first schema a search_path setting names, or ""
// when it names none explicitly ("$user", or no setting).
func firstSchema(searchPath string) string {
	first, _, _ := strings.Cut(searchPath, ",")
	first = strings.TrimSpace(first)
	if strings.HasPrefix(first, `"`) && strings.HasSuffix(first, `"`) && len(first) >= 2 {
		first = strings.ReplaceAll(first[1:len(first)-1], `""`, `"`)
	}
	if first == "$user" {
		return ""
	}
	return first
}

// The SQL of the store, in one place.
const (
	sessionColumns = `id, owner, idempotency_key, request_hash, status, agent, first_message, request, state, answer,
		error, error_code, runnable, wake_at, lease_owner, lease_until, attempts, version, event_count,
		created_at, started_at, finished_at, updated_at, group_id, parent_id, schedule_id`

	// insertEvents appends the events given as arrays ($E+0 types, $E+1
	// data, $E+2 times) after index base to the session of the CTE row.
	insertEventsSQL = `INSERT INTO hrns_events (session_id, idx, type, data, time)
		SELECT w.id, w.base + u.ord - 1, u.type, u.data, u.time
		FROM w, unnest($%d::text[], $%d::bytea[], $%d::timestamptz[]) WITH ORDINALITY AS u(type, data, time, ord)`

	// enqueueSQL writes the outbox rows of the session of the CTE row w,
	// when its status changed (from w.old_status): one per event type
	// ($E+0, with its event id in $E+1) and per enabled webhook of the
	// owner subscribed to it, due at $E+2 (see store.Webhooks).
	enqueueSQL = `INSERT INTO hrns_webhook_deliveries (id, webhook_id, owner, event_id, event_type, session_id,
			session_status, previous_status, occurred_at, state, next_attempt_at, created_at, updated_at)
		SELECT gen_random_uuid()::text, h.id, h.owner, t.id, t.type, w.id, w.status, w.old_status, p.now, 'pending', p.now, p.now, p.now
		FROM w
		JOIN hrns_webhooks h ON h.owner = w.owner AND NOT h.disabled
		CROSS JOIN (SELECT $%d::text[] AS types, $%d::text[] AS ids, $%d::timestamptz AS now) p
		CROSS JOIN unnest(p.types, p.ids) AS t(type, id)
		WHERE w.old_status IS DISTINCT FROM w.status
			AND (t.type = ANY (h.events) OR (t.type = 'session.status_updated' AND '*' = ANY (h.events)))
		ON CONFLICT DO NOTHING
		RETURNING 1`

	// deliveriesSQL: whether enqueueSQL wrote rows, which the delivery
	// workers of every replica are then told of.
	deliveriesSQL = `EXISTS (SELECT 1 FROM d)`

	// What a commit announces once it returns (see Store.announce): the
	// session's id, and whether the change may give workers something
	// to claim. The statements do not notify themselves: PostgreSQL
	// serialises the commits of transactions that notify (see notify.go).
	workSQL = `w.work`

	createSQL = `WITH w AS (
		INSERT INTO hrns_sessions (` + sessionColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $29, $30, CASE WHEN $29::text <> '' THEN 1 ELSE 0 END, 1,
			$15, $16, $17, $18, $19, $20, $21, $22)
		ON CONFLICT (owner, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
		RETURNING id, owner, status, ''::text AS old_status, 0::bigint AS base, (runnable OR wake_at IS NOT NULL) AND lease_owner = '' AS work
	), e AS (` + insertEventsSQL + `), d AS (` + enqueueSQL + `)
	SELECT ` + workSQL + `, ` + deliveriesSQL + ` FROM w`

	updateSQL = `WITH o AS (
		SELECT status FROM hrns_sessions WHERE id = $1
	), lk AS (
		-- With a claim only: the row locked, as the update will find it
		-- (Claim does not move the version), and whether to claim it.
		SELECT ` + claimsSQL + ` AS claims FROM hrns_sessions WHERE id = $1 AND $29::text <> '' FOR UPDATE
	), w AS (
		UPDATE hrns_sessions SET status = $2, agent = $3, first_message = $4, state = $5, answer = $6,
			error = $7, error_code = $8, runnable = $9, wake_at = $10,
			version = version + 1, event_count = event_count + $11,
			started_at = $12, finished_at = $13, updated_at = $14,
			request = coalesce($33::bytea, request),
			lease_owner = CASE WHEN $15::boolean THEN '' WHEN ` + claimedSQL + ` THEN $29 ELSE lease_owner END,
			lease_until = CASE WHEN $15::boolean THEN NULL WHEN ` + claimedSQL + ` THEN $30 ELSE lease_until END,
			attempts = CASE WHEN ` + claimedSQL + ` THEN (CASE WHEN $18::boolean THEN 0 ELSE attempts END) + 1
				WHEN $18::boolean THEN 0 ELSE attempts END,
			claim_token = CASE WHEN ` + claimedSQL + ` THEN $34::text ELSE claim_token END
		WHERE id = $1 AND version = $16 AND ($17::text = '' OR (lease_owner IS NOT DISTINCT FROM $17 AND lease_until > $14))
			AND ($24::bigint < 0 OR $24 <= (` + messageCountSQL + `))
		RETURNING id, owner, status, (SELECT status FROM o) AS old_status, event_count - $11 AS base,
			(runnable OR wake_at IS NOT NULL) AND (lease_owner = '' OR lease_until <= $14) AS work,
			` + claimedSQL + ` AS claimed, lease_until, attempts
	), e AS (` + insertEventsSQL + `), d AS (` + enqueueSQL + `),
	-- The transcript ($24 < 0: unchanged): the messages from $24 on are
	-- replaced by $25, those past them deleted (none when appending).
	tt AS (
		DELETE FROM hrns_session_messages
		WHERE $24::bigint >= 0 AND session_id = (SELECT id FROM w) AND idx >= $24 + cardinality($25::bytea[])
	), tm AS (
		INSERT INTO hrns_session_messages (session_id, idx, data)
		SELECT w.id, $24 + u.ord - 1, u.data FROM w, unnest($25::bytea[]) WITH ORDINALITY AS u(data, ord)
		WHERE $24::bigint >= 0
		ON CONFLICT (session_id, idx) DO UPDATE SET data = EXCLUDED.data
	),
	-- The step's tokens ($28 > 0), added to the owner's count: to the
	-- stripe of this server process (see usageStripes).
	tq AS (
		INSERT INTO hrns_token_usage_stripes (owner, period, window_start, stripe, tokens)
		SELECT w.owner, $26::text, $27::timestamptz, ` + stripeSQL + `, $28::bigint FROM w WHERE $28::bigint > 0
		ON CONFLICT (owner, period, window_start, stripe) DO UPDATE SET tokens = hrns_token_usage_stripes.tokens + excluded.tokens
	)
	SELECT w.base, ` + workSQL + `, ` + deliveriesSQL + `, w.claimed, w.lease_until, w.attempts FROM w`

	// claimsSQL: whether an update claims the session
	// (store.UpdateOptions.Claim: $29 the owner, '' for no claim; $30 the
	// lease's end; $31 BelowAttempts; $32 the claim's now; $34 its token), on the row as
	// it is before the update and the runnable flag the update writes;
	// claimedSQL is its value for the statement (the lk CTE).
	claimedSQL = `coalesce((SELECT claims FROM lk), false)`
	claimsSQL  = `($29::text <> '' AND $9::boolean AND (lease_owner = '' OR lease_until <= $32::timestamptz)
			AND ($31::bigint <= 0 OR (CASE WHEN $18::boolean THEN 0 ELSE attempts END) < $31))`

	getSQL = `SELECT ` + sessionColumns + ` FROM hrns_sessions WHERE id = $1`

	eventCountSQL = `SELECT owner, event_count FROM hrns_sessions WHERE id = $1`

	existsSQL = `SELECT EXISTS (SELECT 1 FROM hrns_sessions WHERE id = $1)`

	messageCountSQL = `SELECT coalesce(max(idx) + 1, 0) FROM hrns_session_messages WHERE session_id = $1`

	messagesSQL = `SELECT data FROM hrns_session_messages WHERE session_id = $1 AND idx >= $2 ORDER BY idx LIMIT $3`

	eventsSQL = `SELECT idx, type, data, time FROM hrns_events WHERE session_id = $1 AND idx >= $2 ORDER BY idx LIMIT $3`
	// eventsWithinSQL is eventsSQL stopping after the event that brings
	// the data to $4 bytes: the rows past it are left out by the database
	// (octet_length reads a stored value's size without its bytes).
	eventsWithinSQL = `SELECT idx, type, data, time FROM (
		SELECT idx, type, data, time, SUM(octet_length(data)) OVER (ORDER BY idx) - octet_length(data) AS before
		FROM hrns_events WHERE session_id = $1 AND idx >= $2 ORDER BY idx LIMIT $3) e
		WHERE before < $4 ORDER BY idx`

	// claimSQL takes the sessions that need a worker and are free, fairly
	// across owners (see store.Store.Claim), as ClaimDeliveries takes
	// deliveries: o lists the owners with runnable sessions (a skip scan of
	// hrns_sessions_runnable_by_owner, one search per owner, however many
	// sessions each has); busy counts each owner's runnable sessions whose
	// lease is live (on hrns_sessions_leased_by_owner); r reads each
	// owner's oldest $2 free runnable ones in the order of
	// hrns_sessions_runnable_by_owner, locked, stopping there; t the oldest
	// $2 free sessions whose wake-up time has come, counted with their
	// owner's; each candidate's rank is its owner's count plus its place
	// among the owner's candidates, and the claim takes the $2 of lowest
	// rank, the oldest first among equals. Each part is an index scan that
	// stops at its limit: one condition with OR (runnable OR wake_at <=
	// $1) was a bitmap scan of both partial indexes that visited, at every
	// claim, each row version they still listed (every session runnable
	// once since the last VACUUM), where an index scan marks the dead ones
	// for the next scans to skip (see performance.md). The update checks
	// the lease again: a claim that waited for a row another claim locked
	// reads it as that claim committed it.
	claimSQL = `WITH RECURSIVE o(owner) AS (
		(SELECT owner FROM hrns_sessions WHERE runnable ORDER BY owner LIMIT 1)
		UNION ALL
		SELECT (SELECT s.owner FROM hrns_sessions s WHERE s.runnable AND s.owner > o.owner ORDER BY s.owner LIMIT 1)
		FROM o WHERE o.owner IS NOT NULL
	), t AS (
		SELECT id, owner, created_at FROM hrns_sessions
		WHERE wake_at <= $1 AND (lease_owner = '' OR lease_until <= $1) AND ($5 <= 0 OR attempts < $5)
		ORDER BY created_at, id
		LIMIT $2
		FOR UPDATE
	), busy AS (
		SELECT w.owner, (SELECT count(*) FROM hrns_sessions b
			WHERE b.owner = w.owner AND b.runnable AND b.lease_owner <> '' AND b.lease_until > $1) AS n
		FROM (SELECT owner FROM o WHERE owner IS NOT NULL UNION SELECT owner FROM t) w
	), r AS (
		SELECT x.id, x.owner, x.created_at FROM busy
		CROSS JOIN LATERAL (
			SELECT id, owner, created_at FROM hrns_sessions
			WHERE owner = busy.owner AND runnable AND (lease_owner = '' OR lease_until <= $1) AND ($5 <= 0 OR attempts < $5)
			ORDER BY created_at, id
			LIMIT $2
			FOR UPDATE
		) x
	), c AS (
		SELECT u.id FROM (
			SELECT id, owner, created_at,
				row_number() OVER (PARTITION BY owner ORDER BY created_at, id) - 1 AS place
			FROM (SELECT id, owner, created_at FROM r UNION SELECT id, owner, created_at FROM t) v
		) u JOIN busy ON busy.owner = u.owner
		ORDER BY busy.n + u.place, u.created_at, u.id
		LIMIT $2
	)
	UPDATE hrns_sessions SET lease_owner = $3, lease_until = $4, attempts = attempts + 1, claim_token = $6
	WHERE id IN (SELECT id FROM c) AND (lease_owner = '' OR lease_until <= $1)
	RETURNING ` + sessionColumns

	// recoverClaimSQL extends the leases a claim ($2, of owner $1) took
	// and holds still (store.Store.RecoverClaim), found through
	// hrns_sessions_by_lease_owner.
	recoverClaimSQL = `UPDATE hrns_sessions SET lease_until = $3
	WHERE lease_owner = $1 AND lease_owner <> '' AND claim_token = $2
	RETURNING ` + sessionColumns

	// The statements that find a session by id and check its lease
	// compare lease_owner with IS NOT DISTINCT FROM (the same as = on
	// this NOT NULL column), which no index serves: with lease_owner = $2,
	// the planner may read the session through hrns_sessions_by_lease_owner
	// instead of the primary key, when the statistics show no leases
	// (ANALYZE ran while none was held), and so read every entry of the
	// replica's id that index holds, one for each session it leased since
	// the last VACUUM (see performance.md). TestHotStatementsUsePrimaryKey
	// checks the plans.
	renewSQL = `UPDATE hrns_sessions SET lease_until = $4 WHERE id = $1 AND lease_owner IS NOT DISTINCT FROM $2 AND lease_until > $3`

	releaseSQL = `WITH w AS (
		UPDATE hrns_sessions SET lease_owner = '', lease_until = NULL, attempts = 0
		WHERE id = $1 AND lease_owner IS NOT DISTINCT FROM $2
		RETURNING id
	)
	SELECT 1 FROM w`

	// nextWakeSQL: a session held by a live lease is due when the lease
	// expires (or at its wake-up time, if later, when it does not need a
	// worker now); a free one at its wake-up time. Runnable free sessions
	// are Claim's now, not a time to come. The two kinds are read apart:
	// the sessions leased (few: those running) through
	// hrns_sessions_by_lease_owner, and the earliest free one waiting for
	// its time in the order of hrns_sessions_wake, which stops at the
	// first. One condition over both was a bitmap scan of the partial
	// indexes on runnable and wake_at that visited every row version they
	// listed (see claimSQL). A lease_owner without a lease_until (which
	// no statement writes) counts as free, as it did.
	nextWakeSQL = `SELECT least(
		(SELECT min(CASE WHEN NOT runnable AND wake_at > lease_until THEN wake_at ELSE lease_until END)
			FROM hrns_sessions
			WHERE lease_owner <> '' AND lease_until > $1 AND (runnable OR wake_at IS NOT NULL)),
		(SELECT wake_at FROM hrns_sessions
			WHERE wake_at IS NOT NULL AND NOT runnable AND (lease_owner = '' OR lease_until IS NULL OR lease_until <= $1)
			ORDER BY wake_at
			LIMIT 1))`
)

// statements are the statements with their parameter numbers filled in,
// at first use: every hrns command links this package, few open a
// PostgreSQL store.
var statements = sync.OnceValue(func() (s struct{ create, update string }) {
	s.create = fmt.Sprintf(createSQL, 23, 24, 25, 26, 27, 28)
	s.update = fmt.Sprintf(updateSQL, 19, 20, 21, 22, 23, 14)
	return s
})

type scanner interface{ Scan(...any) error }

func scanSession(sc scanner) (*store.Session, error) {
	var (
		s                                                     store.Session
		wake, leaseUntil, created, started, finished, updated pgtype.Timestamptz
		request, state, answer                                []byte
	)
	err := sc.Scan(&s.ID, &s.Owner, &s.IdempotencyKey, &s.RequestHash, &s.Status, &s.Agent, &s.FirstMessage,
		&request, &state, &answer, &s.Error, &s.ErrorCode, &s.Runnable, &wake, &s.LeaseOwner, &leaseUntil,
		&s.Attempts, &s.Version, &s.EventCount, &created, &started, &finished, &updated, &s.GroupID, &s.ParentID, &s.ScheduleID)
	if err != nil {
		return nil, err
	}
	s.Request, s.State, s.Answer = request, state, answer
	s.WakeAt, s.LeaseUntil = fromTS(wake), fromTS(leaseUntil)
	s.CreatedAt, s.StartedAt, s.FinishedAt, s.UpdatedAt = fromTS(created), fromTS(started), fromTS(finished), fromTS(updated)
	return &s, nil
}

// ts is a time as a parameter: NULL for the zero time.
func ts(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

func fromTS(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// eventArrays returns the events as the arrays insertEventsSQL takes,
// numbering them from base and timing them at now when they have no time.
func eventArrays(events []store.Event, base int64, now time.Time) (types []string, data [][]byte, times []time.Time) {
	types = make([]string, len(events))
	data = make([][]byte, len(events))
	times = make([]time.Time, len(events))
	for i := range events {
		e := &events[i]
		e.Index = base + int64(i)
		if e.Time.IsZero() {
			e.Time = now
		}
		types[i], data[i], times[i] = e.Type, e.Data, e.Time
		if data[i] == nil {
			data[i] = []byte("null")
		}
	}
	return types, data, times
}

// wrap reports errors after Close as store.ErrClosed.
func (s *Store) wrap(err error) error {
	if err != nil && s.closed.Load() {
		return fmt.Errorf("%w: %w", store.ErrClosed, err)
	}
	return err
}

func (s *Store) check() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// CreateSession implements [store.Store].
func (s *Store) CreateSession(ctx context.Context, sess *store.Session, events []store.Event) (*store.Session, bool, error) {
	if err := s.check(); err != nil {
		return nil, false, err
	}
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
	var leaseUntil pgtype.Timestamptz
	if n.LeaseOwner != "" {
		leaseUntil = ts(n.LeaseUntil)
	}
	types, data, times := eventArrays(events, 0, now)
	hookTypes, hookIDs := hookArrays(n.ID, n.Status, n.Version)
	rows, err := s.pool.Query(ctx, statements().create,
		n.ID, n.Owner, n.IdempotencyKey, n.RequestHash, n.Status, text(n.Agent), text(n.FirstMessage),
		[]byte(n.Request), []byte(n.State), []byte(n.Answer), text(n.Error), n.ErrorCode, n.Runnable, ts(n.WakeAt),
		n.EventCount, ts(n.CreatedAt), ts(n.StartedAt), ts(n.FinishedAt), ts(n.UpdatedAt),
		text(n.GroupID), text(n.ParentID), text(n.ScheduleID),
		types, data, times, hookTypes, hookIDs, ts(now), n.LeaseOwner, leaseUntil)
	if err != nil {
		return nil, false, fmt.Errorf("create session: %w", s.wrap(err))
	}
	created := 0
	var work, hooked bool
	for rows.Next() {
		created++
		if err := rows.Scan(&work, &hooked); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("create session: %w", s.wrap(err))
		}
	}
	if err := rows.Err(); err != nil {
		s.announceUncertain(err, n.ID, true)
		return nil, false, fmt.Errorf("create session: %w", s.wrap(err))
	}
	if created == 1 {
		s.announceCommit(n.ID, work, hooked)
		return &n, true, nil
	}
	// The owner has a session with this idempotency key.
	existing, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM hrns_sessions WHERE owner = $1 AND idempotency_key = $2`, n.Owner, n.IdempotencyKey))
	if err != nil {
		return nil, false, fmt.Errorf("create session: read the session of idempotency key: %w", s.wrap(err))
	}
	return existing, false, nil
}

// GetSession implements [store.Store].
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanSession(s.pool.QueryRow(ctx, getSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", s.wrap(err))
	}
	return got, nil
}

// EventCount implements [store.Store].
func (s *Store) EventCount(ctx context.Context, id string) (string, int64, error) {
	if err := s.check(); err != nil {
		return "", 0, err
	}
	var owner string
	var count int64
	err := s.pool.QueryRow(ctx, eventCountSQL, id).Scan(&owner, &count)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, store.ErrNotFound
	}
	if err != nil {
		return "", 0, fmt.Errorf("event count: %w", s.wrap(err))
	}
	return owner, count, nil
}

// ListSessions implements [store.Store].
func (s *Store) ListSessions(ctx context.Context, p *store.ListParams) ([]*store.Session, int, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	where := `owner = $1`
	args := []any{p.Owner}
	add := func(cond string, v any) {
		args = append(args, v)
		where += ` AND ` + strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args)))
	}
	if len(p.Statuses) > 0 {
		add(`status = ANY($?)`, p.Statuses)
	}
	if len(p.Agents) > 0 {
		agents := make([]string, len(p.Agents))
		for i, a := range p.Agents {
			agents[i] = text(a)
		}
		add(`agent = ANY($?)`, agents)
	}
	for _, f := range []struct{ col, v string }{{"group_id", p.GroupID}, {"parent_id", p.ParentID}, {"schedule_id", p.ScheduleID}} {
		if f.v != "" {
			add(f.col+` = $?`, text(f.v))
		}
	}
	for _, f := range []struct {
		cond string
		t    time.Time
	}{{"created_at > $?", p.CreatedAfter}, {"created_at < $?", p.CreatedBefore}, {"finished_at > $?", p.FinishedAfter}, {"finished_at < $?", p.FinishedBefore}} {
		if !f.t.IsZero() {
			add(f.cond, ts(f.t))
		}
	}
	if p.Search != "" {
		// Bounded by the owner's index range: no scan of other owners.
		// ASCII case folding, as the SQLite store does.
		pat := "%" + likeEscaper.Replace(strings.ToLower(text(p.Search))) + "%"
		add(`(lower(first_message) LIKE $? OR lower(convert_from(coalesce(answer, ''), 'UTF8')) LIKE $?)`, pat)
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_sessions WHERE `+where, args...).Scan(&total); err != nil {
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
	n := len(args)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT %s FROM hrns_sessions WHERE %s ORDER BY created_at %s, id %s LIMIT $%d OFFSET $%d`,
		sessionColumns, where, order, order, n+1, n+2), append(args, limit, max(p.Offset, 0))...)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Session, error) { return scanSession(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", s.wrap(err))
	}
	return out, total, nil
}

// likeEscaper escapes the wildcards of LIKE (whose escape character is \\
// by default).
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// UpdateSession implements [store.Store].
func (s *Store) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if err := s.check(); err != nil {
		return err
	}
	var o store.UpdateOptions
	if opts != nil {
		o = *opts
	}
	now := time.Now().UTC()
	args, err := s.updateArgs(sess, events, &o, now)
	if err != nil {
		return err
	}
	var base int64
	var work, hooked, claimed bool
	var leaseUntil pgtype.Timestamptz
	var attempts int
	err = s.pool.QueryRow(ctx, statements().update, args...).Scan(&base, &work, &hooked, &claimed, &leaseUntil, &attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.whyNotUpdated(ctx, sess, &o, now)
	} else if err != nil {
		s.announceUncertain(err, sess.ID, true)
	}
	if err != nil {
		return fmt.Errorf("update session %s: %w", sess.ID, s.wrap(err))
	}
	for i := range events {
		events[i].Index = base + int64(i)
	}
	sess.Version++
	sess.EventCount = base + int64(len(events))
	sess.UpdatedAt = now
	if o.Release {
		sess.LeaseOwner, sess.LeaseUntil = "", time.Time{}
	}
	if o.Release || o.ResetAttempts {
		sess.Attempts = 0
	}
	if claimed {
		sess.LeaseOwner, sess.LeaseUntil, sess.Attempts = o.Claim.Owner, fromTS(leaseUntil), attempts
	}
	if o.Committed != nil {
		asStored(sess, events)
		o.Committed(sess, events)
	}
	s.announceCommit(sess.ID, work, hooked)
	return nil
}

// updateArgs returns the arguments of the update statement that commits
// sess with events as o says, at now.
func (s *Store) updateArgs(sess *store.Session, events []store.Event, o *store.UpdateOptions, now time.Time) ([]any, error) {
	// The indexes are known once the statement has read the count; the
	// arrays carry the events in order and the statement numbers them.
	types, data, times := eventArrays(events, 0, now)
	hookTypes, hookIDs := hookArrays(sess.ID, sess.Status, sess.Version+1)
	from, msgs := int64(-1), [][]byte{}
	if t := o.Transcript; t != nil {
		if t.From < 0 {
			return nil, fmt.Errorf("update session %s: %w: from %d", sess.ID, store.ErrTranscriptGap, t.From)
		}
		from = t.From
		for _, m := range t.Messages {
			if m == nil {
				m = json.RawMessage("null")
			}
			msgs = append(msgs, m)
		}
	}
	var tokPeriod string
	var tokStart pgtype.Timestamptz
	var tokN int64
	if t := o.Tokens; t != nil {
		if t.N < 0 {
			return nil, fmt.Errorf("update session %s: %w", sess.ID, store.ErrNegativeTokens)
		}
		tokPeriod, tokStart, tokN = t.Period, ts(t.Start.Truncate(time.Microsecond)), t.N
	}
	// The request ($33): NULL keeps it; it is written only by a
	// re-encryption (store.UpdateOptions.WriteRequest).
	var request []byte
	if o.WriteRequest && sess.Request != nil {
		request = sess.Request
	}
	var claimOwner, claimToken string
	var claimUntil, claimNow pgtype.Timestamptz
	var claimBelow int64
	if c := o.Claim; c != nil {
		if o.Lease != "" || o.Release {
			return nil, fmt.Errorf("update session %s: %w", sess.ID, store.ErrClaimWithLease)
		}
		if c.Owner == "" {
			return nil, fmt.Errorf("update session %s: claim without an owner", sess.ID)
		}
		claimOwner, claimUntil, claimNow, claimBelow, claimToken = c.Owner, ts(c.Now.Add(c.TTL)), ts(c.Now), int64(c.BelowAttempts), c.Token
	}
	return []any{sess.ID, sess.Status, text(sess.Agent), text(sess.FirstMessage), []byte(sess.State), []byte(sess.Answer),
		text(sess.Error), sess.ErrorCode, sess.Runnable, ts(sess.WakeAt), int64(len(events)),
		ts(sess.StartedAt), ts(sess.FinishedAt), ts(now), o.Release, sess.Version, o.Lease, o.Release || o.ResetAttempts,
		types, data, times, hookTypes, hookIDs, from, msgs, tokPeriod, tokStart, tokN,
		claimOwner, claimUntil, claimBelow, claimNow, request, claimToken}, nil
}

// text is s for a text column, which cannot hold NUL (PostgreSQL refuses
// the statement: "invalid byte sequence for encoding UTF8: 0x00"): each NUL
// becomes U+FFFD. A caller's first message, agent name or group id, or a
// session's error, may hold one (JSON's \u0000); refused, it made the
// creation a 500 on PostgreSQL where SQLite took it.
func text(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

// textPtr is text for a nullable text column.
func textPtr(s *string) *string {
	if s == nil {
		return nil
	}
	t := text(*s)
	return &t
}

// asStored gives the times of s and events the precision (microseconds)
// and location they are read back with, and the events' missing data the
// null stored (see [store.UpdateOptions.Committed]).
func asStored(s *store.Session, events []store.Event) {
	for _, t := range []*time.Time{&s.CreatedAt, &s.StartedAt, &s.FinishedAt, &s.UpdatedAt, &s.WakeAt, &s.LeaseUntil} {
		*t = storedTime(*t)
	}
	for i := range events {
		e := &events[i]
		e.Time = storedTime(e.Time)
		if e.Data == nil {
			e.Data = json.RawMessage("null")
		}
	}
}

// storedTime is t as a timestamptz keeps it.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}

// whyNotUpdated tells why an update wrote nothing: the session does not
// exist, the caller lost its lease, or someone committed since it read.
func (s *Store) whyNotUpdated(ctx context.Context, sess *store.Session, o *store.UpdateOptions, now time.Time) error {
	var version int64
	var owner string
	var until pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, `SELECT version, lease_owner, lease_until FROM hrns_sessions WHERE id = $1`, sess.ID).Scan(&version, &owner, &until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return err
	case o.Lease != "" && (owner != o.Lease || !fromTS(until).After(now)):
		return store.ErrLeaseLost
	case version == sess.Version && o.Transcript != nil:
		var stored int64
		if err := s.pool.QueryRow(ctx, messageCountSQL, sess.ID).Scan(&stored); err != nil {
			return err
		}
		if o.Transcript.From > stored {
			return fmt.Errorf("%w: from %d, %d stored", store.ErrTranscriptGap, o.Transcript.From, stored)
		}
	}
	return store.ErrConflict
}

// Messages implements [store.Store].
func (s *Store) Messages(ctx context.Context, id string, from int64, limit int) ([]json.RawMessage, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := s.pool.Query(ctx, messagesSQL, id, from, lim)
	if err != nil {
		return nil, fmt.Errorf("messages: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (json.RawMessage, error) {
		var data []byte
		err := r.Scan(&data)
		return data, err
	})
	if err != nil {
		return nil, fmt.Errorf("messages: %w", s.wrap(err))
	}
	if len(out) == 0 {
		if err := s.mustExist(ctx, id); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
		return nil, nil
	}
	return out, nil
}

// Events implements [store.Store].
func (s *Store) Events(ctx context.Context, id string, from int64, limit int) ([]store.Event, error) {
	return s.EventsWithin(ctx, id, from, limit, 0)
}

// EventIndexes implements [store.Store].
func (s *Store) EventIndexes(ctx context.Context, id, typ string) ([]int64, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT idx FROM hrns_events WHERE session_id = $1 AND type = $2 ORDER BY idx`, id, typ)
	if err != nil {
		return nil, fmt.Errorf("event indexes: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("event indexes: %w", s.wrap(err))
	}
	if len(out) == 0 {
		if err := s.mustExist(ctx, id); err != nil {
			return nil, fmt.Errorf("event indexes: %w", err)
		}
		return []int64{}, nil
	}
	return out, nil
}

// EventsWithin implements [store.Store]: the database leaves out the
// rows past the budget.
func (s *Store) EventsWithin(ctx context.Context, id string, from int64, limit int, maxBytes int64) ([]store.Event, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	var rows pgx.Rows
	var err error
	if maxBytes > 0 {
		rows, err = s.pool.Query(ctx, eventsWithinSQL, id, from, lim, maxBytes)
	} else {
		rows, err = s.pool.Query(ctx, eventsSQL, id, from, lim)
	}
	if err != nil {
		return nil, fmt.Errorf("events: %w", s.wrap(err))
	}
	out, err := func() ([]store.Event, error) {
		defer rows.Close()
		var out []store.Event
		var read int64
		for rows.Next() {
			var e store.Event
			var data []byte
			var t time.Time
			if err := rows.Scan(&e.Index, &e.Type, &data, &t); err != nil {
				return nil, err
			}
			e.Data, e.Time = data, t.UTC()
			out = append(out, e)
			if read += int64(len(data)); maxBytes > 0 && read >= maxBytes {
				break
			}
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("events: %w", s.wrap(err))
	}
	if len(out) == 0 {
		if err := s.mustExist(ctx, id); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		return nil, nil
	}
	return out, nil
}

// mustExist returns store.ErrNotFound when no session has the id.
func (s *Store) mustExist(ctx context.Context, id string) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, existsSQL, id).Scan(&exists); err != nil {
		return s.wrap(err)
	}
	if !exists {
		return store.ErrNotFound
	}
	return nil
}

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.leasedRows(ctx, "claim", p, claimSQL, claimArgs(p)...)
}

// leasedRows runs a statement that leases sessions until p.Now+p.TTL and
// returns them (Claim, RecoverClaim): in creation order, with the lease
// as the caller asked for it, not rounded to microseconds.
func (s *Store) leasedRows(ctx context.Context, what string, p *store.ClaimParams, sql string, args ...any) ([]*store.Session, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Session, error) { return scanSession(r) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, s.wrap(err))
	}
	slices.SortFunc(out, store.CompareCreated)
	for _, got := range out {
		got.LeaseUntil = p.Now.Add(p.TTL)
	}
	return out, nil
}

// claimArgs are the arguments of claimSQL.
func claimArgs(p *store.ClaimParams) []any {
	return []any{ts(p.Now), max(p.Limit, 1), p.Owner, ts(p.Now.Add(p.TTL)), p.BelowAttempts, p.Token}
}

// RecoverClaim implements [store.Store].
func (s *Store) RecoverClaim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if p.Token == "" {
		return nil, nil
	}
	return s.leasedRows(ctx, "recover claim", p, recoverClaimSQL, p.Owner, p.Token, ts(p.Now.Add(p.TTL)))
}

// Renew implements [store.Store].
func (s *Store) Renew(ctx context.Context, id, owner string, until time.Time) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, renewSQL, id, owner, ts(time.Now()), ts(until))
	if err != nil {
		return fmt.Errorf("renew lease of %s: %w", id, s.wrap(err))
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if err := s.mustExist(ctx, id); err != nil {
		return fmt.Errorf("renew lease of %s: %w", id, err)
	}
	return fmt.Errorf("renew lease of %s: %w", id, store.ErrLeaseLost)
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, id, owner string) error {
	if err := s.check(); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, releaseSQL, id, owner)
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", id, s.wrap(err))
	}
	released := 0
	for rows.Next() {
		released++
	}
	if err := rows.Err(); err != nil {
		s.announceUncertain(err, id, true)
		return fmt.Errorf("release lease of %s: %w", id, s.wrap(err))
	}
	if released > 0 {
		// A lease released: the session may be claimed at once.
		s.announce(id, true)
	}
	if released == 0 {
		if err := s.mustExist(ctx, id); err != nil {
			return fmt.Errorf("release lease of %s: %w", id, err)
		}
	}
	return nil
}

// NextWake implements [store.Store].
func (s *Store) NextWake(ctx context.Context, now time.Time) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	var next pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, nextWakeSQL, ts(now)).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("next wake: %w", s.wrap(err))
	}
	return fromTS(next), nil
}

// Subscribe implements [store.Store]. Notifications come from the
// listening connection, for changes committed by any process.
func (s *Store) Subscribe(topic string) (<-chan struct{}, func()) {
	return s.hub.Subscribe(topic)
}
