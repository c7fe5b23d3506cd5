package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// TestHotStatementPlans checks the plans of the statements of a turn
// (the commit, the lease's renewal and release) and of the dispatcher
// (claim, next wake-up) on a table as a fill leaves it: 5,000 parked
// sessions, analysed while none was leased nor runnable, then one
// session running. With those statistics the planner read the session
// of a commit through hrns_sessions_by_lease_owner, and so every entry
// of the replica's id that index held (one for each session leased
// since the last VACUUM: 25,000 buffers for one commit with 100,000),
// and the claim and the next wake-up were bitmap scans, which visit
// every row version a partial index lists and mark none dead (see
// docs/performance.md).
func TestHotStatementPlans(t *testing.T) {
	dsn := postgrestest.DSN(t)
	st := open(t, dsn)
	ctx := t.Context()
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, `INSERT INTO hrns_sessions (id, owner, status, state, version, event_count, created_at, updated_at)
		SELECT 'parked-' || g, 'owner', 'awaiting_tool_results', '\x7b7d', 3, 4, now() - interval '1 hour' + g * interval '1 ms', now()
		FROM generate_series(1, 5000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE hrns_sessions`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	run, _, err := st.CreateSession(ctx, &store.Session{ID: "running", Owner: "owner", Status: "running", Runnable: true,
		LeaseOwner: "replica-a", LeaseUntil: now.Add(time.Minute), State: []byte(`{}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string]func() (string, error){
		"update": func() (string, error) {
			return st.ExplainUpdate(ctx, run, &store.UpdateOptions{Lease: "replica-a"})
		},
		"renew":   func() (string, error) { return st.ExplainRenew(ctx, run.ID, "replica-a", now.Add(2*time.Minute)) },
		"release": func() (string, error) { return st.ExplainRelease(ctx, run.ID, "replica-a") },
		"claim": func() (string, error) {
			return st.ExplainClaim(ctx, &store.ClaimParams{Owner: "replica-b", Now: now, TTL: time.Minute, Limit: 8, BelowAttempts: 2})
		},
		"next wake": func() (string, error) { return st.ExplainNextWake(ctx, now) },
	}
	for name, explain := range plans {
		plan, err := explain()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var bad []string
		for _, no := range []string{"Seq Scan on hrns_sessions", "Bitmap Heap Scan on hrns_sessions"} {
			if strings.Contains(plan, no) {
				bad = append(bad, no)
			}
		}
		switch name {
		case "update", "renew", "release":
			if strings.Contains(plan, "hrns_sessions_by_lease_owner") {
				bad = append(bad, "hrns_sessions_by_lease_owner (want the session by its primary key)")
			}
		case "claim":
			if !strings.Contains(plan, "Index Scan using hrns_sessions_runnable_by_owner") {
				bad = append(bad, "no index scan of hrns_sessions_runnable_by_owner (in its order)")
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s: the plan reads %s:\n%s", name, strings.Join(bad, "; "), plan)
		}
	}
}

// The claim and the next wake-up as they were before they read the
// runnable and the waiting sessions apart (see TestHotStatementPlans).
const (
	claimBefore = `WITH c AS (
		SELECT id FROM hrns_sessions
		WHERE (runnable OR wake_at <= $1) AND (lease_owner = '' OR lease_until <= $1) AND ($5 <= 0 OR attempts < $5)
		ORDER BY created_at, id
		LIMIT $2
		FOR UPDATE
	)
	UPDATE hrns_sessions SET lease_owner = $3, lease_until = $4, attempts = attempts + 1
	WHERE id IN (SELECT id FROM c)
	RETURNING id`

	nextWakeBefore = `SELECT min(CASE
			WHEN lease_owner <> '' AND lease_until > $1 THEN
				CASE WHEN NOT runnable AND wake_at > lease_until THEN wake_at ELSE lease_until END
			ELSE wake_at END)
		FROM hrns_sessions
		WHERE (runnable OR wake_at IS NOT NULL) AND NOT (runnable AND (lease_owner = '' OR lease_until <= $1))`
)

// TestClaimAndNextWakeAsBefore compares the claim and the next wake-up
// with the statements they replaced, on random tables of sessions
// (runnable or not, with a wake-up time past, to come or none, leased by
// one replica or another, live or expired, or free, claimed up to three
// times, created at times that tie), for several limits, attempt
// bounds and times.
func TestClaimAndNextWakeAsBefore(t *testing.T) {
	dsn := postgrestest.DSN(t)
	open(t, dsn) // migrates
	ctx := t.Context()
	conn := connect(t, dsn)
	rng := rand.New(rand.NewPCG(36, 5))
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }
	claimed := func(sql string, now time.Time, limit, below int) []string {
		t.Helper()
		var ids []string
		args := []any{now, limit, "replica-c", now.Add(time.Minute), below}
		if strings.Contains(sql, "$6") {
			args = append(args, "token") // the claim's token, which the statement before it did not write
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, strings.Replace(sql, "RETURNING "+sessionColumnsPrefix(sql), "RETURNING id", 1), args...)
			if err != nil {
				return err
			}
			if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			return errRollback
		})
		if err != errRollback {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}
	nextWake := func(sql string, now time.Time) time.Time {
		t.Helper()
		var next pgtype.Timestamptz
		if err := conn.QueryRow(ctx, sql, now).Scan(&next); err != nil {
			t.Fatal(err)
		}
		return next.Time
	}
	for round := range 60 {
		if _, err := conn.Exec(ctx, `DELETE FROM hrns_sessions`); err != nil {
			t.Fatal(err)
		}
		for i := range 1 + rng.IntN(40) {
			var wake, until *time.Time
			switch rng.IntN(3) {
			case 0:
				w := at(rng.IntN(20) - 10)
				wake = &w
			}
			owner := []string{"", "", "replica-a", "replica-b"}[rng.IntN(4)]
			if owner != "" && rng.IntN(20) > 0 { // rarely a lease without an end, which no statement writes
				u := at(rng.IntN(20) - 10)
				until = &u
			}
			if _, err := conn.Exec(ctx, `INSERT INTO hrns_sessions (id, owner, status, runnable, wake_at, lease_owner, lease_until, attempts, version, created_at, updated_at)
				VALUES ($1, 'owner', 'running', $2, $3, $4, $5, $6, 1, $7, $7)`,
				fmt.Sprintf("s%02d", i), rng.IntN(2) == 0, wake, owner, until, rng.IntN(4), at(rng.IntN(10))); err != nil {
				t.Fatal(err)
			}
		}
		for range 5 {
			now := at(rng.IntN(24) - 12)
			limit, below := 1+rng.IntN(6), rng.IntN(4)
			if got, want := claimed(postgres.ClaimSQL, now, limit, below), claimed(claimBefore, now, limit, below); !slices.Equal(got, want) {
				t.Fatalf("round %d, claim at %v, limit %d, below %d attempts: %v, before %v", round, now, limit, below, got, want)
			}
			if got, want := nextWake(postgres.NextWakeSQL, now), nextWake(nextWakeBefore, now); !got.Equal(want) {
				t.Fatalf("round %d, next wake-up at %v: %v, before %v", round, now, got, want)
			}
		}
	}
}

var errRollback = fmt.Errorf("rollback")

// sessionColumnsPrefix returns what follows RETURNING in a claim
// statement, so that both return the ids alone.
func sessionColumnsPrefix(sql string) string {
	_, after, _ := strings.Cut(sql, "RETURNING ")
	return after
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestClaimPlanWithBacklog: with 100,000 runnable sessions of one key
// and one of another, the fair claim reads each part on its partial
// index (the owners by a skip scan, each owner's sessions running and
// its oldest free ones by owner), never the whole backlog, and a claim
// of two takes the second key's session.
func TestClaimPlanWithBacklog(t *testing.T) {
	dsn := postgrestest.DSN(t)
	st := open(t, dsn)
	ctx := t.Context()
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, `INSERT INTO hrns_sessions (id, owner, status, runnable, state, version, event_count, created_at, updated_at)
		SELECT 'a-' || g, 'key-a', 'pending', true, '\x7b7d', 1, 0, now() - interval '1 hour' + g * interval '1 ms', now()
		FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO hrns_sessions (id, owner, status, runnable, state, version, event_count, created_at, updated_at)
		VALUES ('b-1', 'key-b', 'pending', true, '\x7b7d', 1, 0, now(), now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE hrns_sessions`); err != nil {
		t.Fatal(err)
	}
	p := &store.ClaimParams{Owner: "replica-a", Token: "token", Now: time.Now(), TTL: time.Minute, Limit: 4, BelowAttempts: 2}
	plan, err := st.ExplainClaim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, no := range []string{"Seq Scan on hrns_sessions", "Bitmap Heap Scan on hrns_sessions"} {
		if strings.Contains(plan, no) {
			bad = append(bad, no)
		}
	}
	// The sessions running are counted on an index of leases: by owner
	// (hrns_sessions_leased_by_owner) or by replica, which the planner
	// may prefer when the statistics show no lease.
	for _, want := range []string{"Index Only Scan using hrns_sessions_runnable_by_owner", "Index Scan using hrns_sessions_runnable_by_owner"} {
		if !strings.Contains(plan, want) {
			bad = append(bad, "no "+want)
		}
	}
	if !strings.Contains(plan, "using hrns_sessions_leased_by_owner on hrns_sessions b") && !strings.Contains(plan, "using hrns_sessions_by_lease_owner on hrns_sessions b") {
		bad = append(bad, "the sessions running counted on no index of leases")
	}
	if len(bad) > 0 {
		t.Errorf("the claim's plan reads %s:\n%s", strings.Join(bad, "; "), plan)
	}
	p.Limit = 2
	got, err := st.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	if !slices.Equal(ids, []string{"a-1", "b-1"}) {
		t.Errorf("claim of 2: %v; want [a-1 b-1]", ids)
	}
}
