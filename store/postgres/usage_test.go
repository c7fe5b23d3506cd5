package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// TestUsageStripesSQL: the statements' stripes are the ones the store
// counts.
func TestUsageStripesSQL(t *testing.T) {
	if want := fmt.Sprintf("mod(pg_backend_pid(), %d)", postgres.UsageStripes); !strings.Contains(postgres.StripeSQL, want) {
		t.Errorf("stripe expression %q, want %q in it", postgres.StripeSQL, want)
	}
}

// connPair returns two connections to dsn whose server processes count
// into different stripes of a token count, and their pids.
func connPair(t *testing.T, dsn string) (a, b *pgx.Conn, pidA, pidB uint32) {
	t.Helper()
	a = connect(t, dsn)
	pidA = a.PgConn().PID()
	// Bounded: consecutive server processes mostly differ already.
	for range 4 * postgres.UsageStripes {
		b = connect(t, dsn)
		pidB = b.PgConn().PID()
		if pidA%postgres.UsageStripes != pidB%postgres.UsageStripes {
			return a, b, pidA, pidB
		}
		b.Close(t.Context())
	}
	t.Fatalf("no connection whose pid differs from %d modulo %d", pidA, postgres.UsageStripes)
	return
}

// TestTokenCommitsOfOneKeyDoNotWait holds a commit of one key's session
// that counts tokens open, then commits another session of the key that
// counts tokens on another connection: the second must not wait for the
// first (before the stripes, both updated the key's one row of
// hrns_token_usage, and the second waited on the first's row lock until
// the first was durable). Load-independent: the second statement either
// returns or shows up in pg_blocking_pids.
func TestTokenCommitsOfOneKeyDoNotWait(t *testing.T) {
	dsn := postgrestest.DSN(t)
	st := open(t, dsn)
	ctx := t.Context()
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var sessions [2]*store.Session
	for i := range sessions {
		s, _, err := st.CreateSession(ctx, &store.Session{ID: fmt.Sprint("s", i), Owner: "key", Status: "running", State: []byte(`{}`)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
	}
	tokens := func(n int64) *store.UpdateOptions {
		return &store.UpdateOptions{Tokens: &store.TokenCount{Period: "day", Start: day, N: n}}
	}
	c1, c2, pid1, pid2 := connPair(t, dsn)
	watch := connect(t, dsn)
	used := func() int64 {
		t.Helper()
		n, err := st.TokensUsed(ctx, "key", "day", day)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	tx1, err := c1.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(context.Background())
	if err := st.UpdateInTx(ctx, tx1, sessions[0], tokens(100)); err != nil {
		t.Fatal(err)
	}
	tx2, err := c2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(context.Background())
	done := make(chan error, 1)
	ctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	go func() { done <- st.UpdateInTx(ctx2, tx2, sessions[1], tokens(20)) }()
	var blocked []uint32
	deadline := time.Now().Add(time.Minute) // a bound, not a measure
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			break wait
		default:
		}
		if err := watch.QueryRow(ctx, `SELECT pg_blocking_pids($1::int)`, int32(pid2)).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(blocked, pid1) {
			// Stop the second before failing: c2 is in use until then.
			cancel2()
			<-done
			t.Fatalf("the second commit of the key (pid %d) waits for the first (pid %d), which holds its token count", pid2, pid1)
		}
		if time.Now().After(deadline) {
			cancel2()
			<-done
			t.Fatal("the second commit neither returned nor waited on the first")
		}
		time.Sleep(time.Millisecond)
	}
	// Both open: neither is counted yet.
	if got := used(); got != 0 {
		t.Errorf("with both commits open: %d tokens, want 0", got)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(); got != 20 {
		t.Errorf("with the second committed: %d tokens, want 20", got)
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(); got != 120 {
		t.Errorf("with both committed: %d tokens, want 120", got)
	}
}

// usageKey names one count: an owner's window.
type usageKey struct {
	owner, period string
	start         time.Time
}

// usageModel is what the store's counts must be: acked holds what every
// acknowledged addition added, started what every addition begun may have
// added (it may still commit, or have failed).
type usageModel struct {
	mu             sync.Mutex
	acked, started map[usageKey]int64
}

func (m *usageModel) begin(k usageKey, n int64) {
	m.mu.Lock()
	m.started[k] += n
	m.mu.Unlock()
}

// end records the addition's outcome: counted when it was acknowledged.
// An addition whose outcome is unknown stays in started only.
func (m *usageModel) end(k usageKey, n int64, counted bool) {
	m.mu.Lock()
	if counted {
		m.acked[k] += n
	}
	m.mu.Unlock()
}

func (m *usageModel) get(k usageKey) (acked, started int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acked[k], m.started[k]
}

// TestTokenUsageModel commits random token counts of a few keys' sessions
// at once from two stores (two replicas' pools), through UpdateSession
// (some refused for a stale version: those count nothing) and AddTokens,
// over a base left in the table of the previous release, while readers
// check that each TokensUsed is at least what was acknowledged before it
// and at most what was begun by its end. Once all are done, every count
// is exactly the model's.
func TestTokenUsageModel(t *testing.T) {
	dsn := postgrestest.DSN(t)
	stores := []*postgres.Store{open(t, dsn), open(t, dsn)}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	keys := []usageKey{}
	for _, owner := range []string{"a", "b", "c"} {
		keys = append(keys, usageKey{owner, "day", day}, usageKey{owner, "day", day.AddDate(0, 0, 1)}, usageKey{owner, "month", day})
	}
	m := &usageModel{acked: map[usageKey]int64{}, started: map[usageKey]int64{}}
	// What the previous release left: one row per key and window.
	conn := connect(t, dsn)
	for _, k := range keys[:4] {
		base := rng.Int64N(1_000_000)
		if _, err := conn.Exec(ctx, `INSERT INTO hrns_token_usage (owner, period, window_start, tokens) VALUES ($1, $2, $3, $4)`,
			k.owner, k.period, k.start, base); err != nil {
			t.Fatal(err)
		}
		m.begin(k, base)
		m.end(k, base, true)
	}
	var ids []string
	owners := map[string]string{}
	for i := range 12 {
		id, owner := fmt.Sprint("s", i), []string{"a", "b", "c"}[i%3]
		if _, _, err := stores[0].CreateSession(ctx, &store.Session{ID: id, Owner: owner, Status: "running", State: []byte(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
		ids, owners[id] = append(ids, id), owner
	}

	const writers, ops = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		seed := rng.Uint64()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			st := stores[w%len(stores)]
			for range ops {
				id := ids[r.IntN(len(ids))]
				k := keys[r.IntN(len(keys))]
				k.owner = owners[id]
				n := r.Int64N(5000)
				if r.IntN(5) == 0 {
					m.begin(k, n)
					_, err := st.AddTokens(ctx, k.owner, k.period, k.start, n)
					m.end(k, n, err == nil)
					if err != nil {
						errs <- err
						return
					}
					continue
				}
				s, err := st.GetSession(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				if r.IntN(4) == 0 {
					s.Version-- // stale: refused, counts nothing
				}
				m.begin(k, n)
				err = st.UpdateSession(ctx, s, nil, &store.UpdateOptions{Tokens: &store.TokenCount{Period: k.period, Start: k.start, N: n}})
				m.end(k, n, err == nil)
				if err != nil && !errors.Is(err, store.ErrConflict) {
					errs <- err
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Go(func() {
			st := stores[r]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[i%len(keys)]
				lo, _ := m.get(k)
				got, err := st.TokensUsed(ctx, k.owner, k.period, k.start)
				_, hi := m.get(k)
				if err != nil {
					errs <- err
					return
				}
				if got < lo || got > hi {
					errs <- fmt.Errorf("TokensUsed(%v) = %d, want between %d (acknowledged before) and %d (begun after)", k, got, lo, hi)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, k := range append(keys, usageKey{"nobody", "day", day}) {
		want, _ := m.get(k)
		for i, st := range stores {
			if got, err := st.TokensUsed(ctx, k.owner, k.period, k.start); err != nil || got != want {
				t.Errorf("store %d: TokensUsed(%v) = %d, %v; want %d", i, k, got, err, want)
			}
		}
	}
	// Sequential additions return the exact new total.
	k := keys[0]
	want, _ := m.get(k)
	for i := range 3 {
		want += int64(i + 1)
		if got, err := stores[i%2].AddTokens(ctx, k.owner, k.period, k.start, int64(i+1)); err != nil || got != want {
			t.Errorf("AddTokens(%v, %d) = %d, %v; want %d", k, i+1, got, err, want)
		}
	}
}

// TestMigrateTokenUsage opens a schema of the previous release (migrations
// up to 011) whose hrns_token_usage has counts: they are read as before,
// new commits add to them, and the previous release's own addition (a
// replica not yet upgraded, in a rolling deploy) still works on the
// migrated schema and is counted.
func TestMigrateTokenUsage(t *testing.T) {
	dsn := postgrestest.DSN(t)
	ctx := t.Context()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, `CREATE TABLE hrns_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		name := filepath.Base(f)
		if name > "011" {
			break
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO hrns_migrations (version, name) VALUES ($1, $2)`, i+1, name); err != nil {
			t.Fatal(err)
		}
	}
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	month := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	// The previous release's addition, verbatim.
	oldAdd := func(owner, period string, start time.Time, n int64) {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO hrns_token_usage (owner, period, window_start, tokens) VALUES ($1, $2, $3, $4)
		ON CONFLICT (owner, period, window_start) DO UPDATE SET tokens = hrns_token_usage.tokens + excluded.tokens
		RETURNING tokens`, owner, period, start, n); err != nil {
			t.Fatal(err)
		}
	}
	oldAdd("alice", "day", day, 1200)
	oldAdd("alice", "day", day, 56)
	oldAdd("alice", "month", month, 7)
	oldAdd("bob", "day", day, 9)

	st := open(t, dsn)
	used := func(owner, period string, start time.Time) int64 {
		t.Helper()
		n, err := st.TokensUsed(ctx, owner, period, start)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		owner, period string
		start         time.Time
		want          int64
	}{{"alice", "day", day, 1256}, {"alice", "month", month, 7}, {"bob", "day", day, 9}, {"carol", "day", day, 0}} {
		if got := used(c.owner, c.period, c.start); got != c.want {
			t.Errorf("after the migration: TokensUsed(%s, %s) = %d, want %d", c.owner, c.period, got, c.want)
		}
	}
	s, _, err := st.CreateSession(ctx, &store.Session{ID: "s", Owner: "alice", Status: "running", State: []byte(`{}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateSession(ctx, s, nil, &store.UpdateOptions{Tokens: &store.TokenCount{Period: "day", Start: day, N: 44}}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.AddTokens(ctx, "alice", "day", day, 100); err != nil || got != 1400 {
		t.Errorf("AddTokens after the migration = %d, %v; want 1400", got, err)
	}
	oldAdd("alice", "day", day, 600)
	if got := used("alice", "day", day); got != 2000 {
		t.Errorf("with the previous release's addition: %d tokens, want 2000", got)
	}
}

// crashChildEnv, when set, makes TestTokenCountsSurviveKill the child
// process that commits (its value: the DSN).
const crashChildEnv = "HRNS_TEST_PGUSAGE_CHILD"

// crashTokens is what the commit of session i from version v counts.
func crashTokens(i int, v int64) int64 { return 10*v + int64(i) }

// TestTokenCountsSurviveKill runs processes that commit sessions of one
// key, each commit counting tokens, and kills them (SIGKILL) once they
// have acknowledged some commits, in the middle of others. Every commit
// written, and only those, is counted: the key's count is exactly the
// tokens of the versions the sessions reached (each commit moves its
// session's version by one), so an acknowledged commit kept its tokens
// and a commit cut by the kill counted nothing. A new store then commits
// on from where the sessions are and the count still matches.
func TestTokenCountsSurviveKill(t *testing.T) {
	if dsn := os.Getenv(crashChildEnv); dsn != "" {
		crashChild(t, dsn)
		return
	}
	dsn := postgrestest.DSN(t)
	st := open(t, dsn)
	ctx := t.Context()
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	const sessions = 4
	for i := range sessions {
		if _, _, err := st.CreateSession(ctx, &store.Session{ID: fmt.Sprint("s", i), Owner: "key", Status: "running", State: []byte(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	var outs []*bufio.Scanner
	for range 2 {
		cmd := exec.Command(exe, "-test.run=^TestTokenCountsSurviveKill$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dsn+"&application_name=hrns_crash_child")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		outs = append(outs, bufio.NewScanner(out))
	}
	// Each child prints a line per acknowledged commit; kill it after 25.
	for i, cmd := range procs {
		acked := 0
		for acked < 25 && outs[i].Scan() {
			acked++
		}
		if acked < 25 {
			t.Fatalf("child %d acknowledged %d commits, then stopped", i, acked)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
	}
	// A killed connection's server process still runs what it had
	// received (and commits it: atomically, session and tokens), then
	// sees the end of the connection and exits. Wait until all have.
	conn := connect(t, dsn)
	gone := false
	for range 3000 {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hrns_crash_child'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if gone = n == 0; gone {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !gone {
		t.Fatal("the killed children's connections are still there")
	}
	check := func(when string) {
		t.Helper()
		var want int64
		for i := range sessions {
			s, err := st.GetSession(ctx, fmt.Sprint("s", i))
			if err != nil {
				t.Fatal(err)
			}
			for v := int64(1); v < s.Version; v++ {
				want += crashTokens(i, v)
			}
		}
		got, err := st.TokensUsed(ctx, "key", "day", day)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %d tokens counted, want %d (the commits written)", when, got, want)
		}
	}
	check("after the kills")
	for i := range sessions {
		s, err := st.GetSession(ctx, fmt.Sprint("s", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.UpdateSession(ctx, s, nil, &store.UpdateOptions{Tokens: &store.TokenCount{Period: "day", Start: day, N: crashTokens(i, s.Version)}}); err != nil {
			t.Fatal(err)
		}
	}
	check("after committing on")
}

// crashChild commits the sessions, four at once (two children share
// them, so some commits conflict and count nothing) until killed,
// printing a line per acknowledged commit.
func crashChild(t *testing.T, dsn string) {
	st, err := postgres.Open(context.Background(), dsn, &postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			// Bounded: the parent kills the child long before.
			for range 100_000 {
				s, err := st.GetSession(ctx, fmt.Sprint("s", i))
				if err != nil {
					t.Error(err)
					return
				}
				err = st.UpdateSession(ctx, s, nil, &store.UpdateOptions{Tokens: &store.TokenCount{Period: "day", Start: day, N: crashTokens(i, s.Version)}})
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				fmt.Println("acked")
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
