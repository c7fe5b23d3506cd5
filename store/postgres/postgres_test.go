package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/storetest"
)

// open opens a store on dsn, closed when the test ends. Pools are small:
// the parallel tests share one server's connections.
func open(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	postgrestest.ServerDSN(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, postgrestest.DSN(t))
	})
}

// received waits for a notification, for at most a generous while: a
// missing notification fails the test instead of hanging it.
func received(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func drain(c <-chan struct{}) {
	for len(c) > 0 {
		<-c
	}
}

// TestWakeUpsCrossStores has two stores on one database, as two replicas
// have: a change committed through one wakes the subscribers of the
// other.
func TestWakeUpsCrossStores(t *testing.T) {
	dsn := postgrestest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := t.Context()
	sessionA, cancel := a.Subscribe("s")
	defer cancel()
	workA, cancelWork := a.Subscribe(store.WorkTopic)
	defer cancelWork()

	steps := []struct {
		name      string
		change    func() error
		wantWork  bool
		checkWork bool
	}{
		{"create a runnable session", func() error {
			_, _, err := b.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Status: "pending", Runnable: true}, []store.Event{{Type: "E"}})
			return err
		}, true, true},
		{"claim it", func() error {
			_, err := b.Claim(ctx, &store.ClaimParams{Owner: "replica-b", Now: time.Now(), TTL: time.Hour})
			return err
		}, false, false},
		{"append under the lease", func() error {
			s, err := b.GetSession(ctx, "s")
			if err != nil {
				return err
			}
			return b.UpdateSession(ctx, s, []store.Event{{Type: "E"}}, &store.UpdateOptions{Lease: "replica-b"})
		}, false, true},
		{"release the lease", func() error { return b.Release(ctx, "s", "replica-b") }, true, true},
	}
	for _, step := range steps {
		drain(sessionA)
		drain(workA)
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.name == "claim it" {
			continue // a claim changes no session topic
		}
		if !received(sessionA) {
			t.Fatalf("%s through b: no notification on a", step.name)
		}
		if !step.checkWork {
			continue
		}
		// The session's notification and the work notification come
		// from the same payload: once the first is in, so is the second.
		if got := len(workA) > 0; got != step.wantWork {
			t.Errorf("%s through b: work notification on a = %v, want %v", step.name, got, step.wantWork)
		}
	}
}

// TestConcurrentOpen starts several stores at once on a new schema: one
// migrates, the others wait for it, and all work.
func TestConcurrentOpen(t *testing.T) {
	dsn := postgrestest.DSN(t)
	const n = 5
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = postgres.Open(context.Background(), dsn, &postgres.Options{MaxConns: 2})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var applied, versions int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version) FROM hrns_migrations`).Scan(&applied, &versions); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("migrations/*.sql")
	if applied != len(files) || versions != len(files) {
		t.Errorf("%d migrations recorded (%d versions), want %d, each once", applied, versions, len(files))
	}
	for i, st := range stores {
		if _, _, err := st.CreateSession(t.Context(), &store.Session{ID: fmt.Sprint("s", i), Owner: "o", Status: "pending"}, nil); err != nil {
			t.Errorf("store %d: %v", i, err)
		}
	}
}

func TestSchemaCreatedFromSearchPath(t *testing.T) {
	server := postgrestest.ServerDSN(t)
	name := postgrestest.SchemaName(t.Name())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), server)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	st := open(t, postgrestest.WithSearchPath(t, server, name))
	if st.Schema() != name {
		t.Errorf("Schema() = %q, want %q", st.Schema(), name)
	}
	if _, _, err := st.CreateSession(t.Context(), &store.Session{ID: "s", Owner: "o", Status: "pending"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dsn := postgrestest.DSN(t)
	open(t, dsn).Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `INSERT INTO hrns_migrations (version, name) VALUES (99, '099_future.sql')`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(t.Context(), dsn, nil)
	if err == nil || !strings.Contains(err.Error(), "newer than this program") {
		t.Errorf("Open on a newer schema = %v, want an error saying it is newer", err)
	}
}

// TestListenerReconnects kills the listening connection's server process:
// the store reconnects, wakes every subscriber (changes may have been
// missed meanwhile), and delivers notifications again.
func TestListenerReconnects(t *testing.T) {
	dsn := postgrestest.DSN(t)
	st := open(t, dsn)
	ctx := t.Context()
	if _, _, err := st.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Status: "pending"}, nil); err != nil {
		t.Fatal(err)
	}
	ch, cancel := st.Subscribe("s")
	defer cancel()
	drain(ch)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	listeners := func() (pids []int32) {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN "' || $1 || '"'`, "hrns_"+st.Schema())
		if err != nil {
			t.Fatal(err)
		}
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	old := listeners()
	if len(old) != 1 {
		t.Fatalf("%d listening connections, want 1", len(old))
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, old[0]); err != nil {
		t.Fatal(err)
	}
	if !received(ch) {
		t.Fatal("no notification after the listener was lost")
	}
	// Once it listens again, changes are announced as before.
	for range 1000 {
		now := listeners()
		if len(now) == 1 && now[0] != old[0] {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	drain(ch)
	s, err := st.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !received(ch) {
		t.Fatal("a change after the listener reconnected was not announced")
	}
}

func TestClosedStore(t *testing.T) {
	st := open(t, postgrestest.DSN(t))
	st.Close()
	_, _, err := st.CreateSession(t.Context(), &store.Session{ID: "s", Owner: "o"}, nil)
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("CreateSession after Close = %v, want ErrClosed", err)
	}
}

// TestPoolSettingsInDSN checks that pgxpool's settings in the DSN size the
// pool and reach neither the server nor the listening connection.
func TestPoolSettingsInDSN(t *testing.T) {
	dsn := postgrestest.DSN(t) + "&pool_max_conns=3&pool_max_conn_idle_time=1m"
	st, err := postgres.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ch, cancel := st.Subscribe("s")
	defer cancel()
	if _, _, err := st.CreateSession(t.Context(), &store.Session{ID: "s", Owner: "o", Status: "pending"}, nil); err != nil {
		t.Fatal(err)
	}
	if !received(ch) {
		t.Error("no notification")
	}
}

// TestMigrateAttempts opens a schema of the first version, with a session
// in it: the upgrade gives the session an attempt count of 0, which
// claims then increment.
func TestMigrateAttempts(t *testing.T) {
	dsn := postgrestest.DSN(t)
	schema, err := os.ReadFile("migrations/001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{string(schema),
		`CREATE TABLE hrns_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO hrns_migrations (version, name) VALUES (1, '001_init.sql')`,
		`INSERT INTO hrns_sessions (id, owner, status, runnable, version, created_at, updated_at) VALUES ('s', 'o', 'running', true, 3, now(), now())`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	st := open(t, dsn)
	s, err := st.GetSession(ctx, "s")
	if err != nil || s.Attempts != 0 || s.Version != 3 {
		t.Fatalf("GetSession after the upgrade = %+v, %v; want version 3, 0 attempts", s, err)
	}
	got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w", Now: time.Now(), TTL: time.Hour})
	if err != nil || len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("Claim after the upgrade = %v, %v; want the session with 1 attempt", got, err)
	}
}
