package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// notifyLockSQL counts the locks on PostgreSQL's notify queue (the
// object lock on pg_database with object id 0 that a transaction which
// notified takes at commit and holds until it is durable: every such
// commit of the server waits for the one before it) held or awaited by
// the server processes whose application_name is $1.
const notifyLockSQL = `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE a.application_name = $1 AND l.locktype = 'object'
		AND l.classid = 'pg_database'::regclass AND l.objid = 0`

// TestCommitsTakeNoNotifyLock commits changes of sessions of one key from
// several connections at once while watching pg_locks: no connection of
// the store's pool may hold or wait for the notify queue's lock, since
// the commits no longer notify in their transaction (before, every commit
// of the store took it, and the commits of all connections waited for one
// another to be durable: BenchmarkTokenCommitsOneKey's lock-waiting).
// Independent of load: a commit that took the lock shows in pg_locks while
// it commits, and the watch runs through all of them.
func TestCommitsTakeNoNotifyLock(t *testing.T) {
	app := "hrns_test_notify_lock"
	dsn := postgrestest.DSN(t) + "&application_name=" + app
	st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	watch, err := pgx.Connect(ctx, postgrestest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())

	const writers, commits = 8, 40
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	sessions := make([]*store.Session, writers)
	for i := range sessions {
		if sessions[i], _, err = st.CreateSession(ctx, &store.Session{ID: fmt.Sprint("s", i), Owner: "key", Status: "running", Runnable: true, State: json.RawMessage(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	seen := make(chan int, 1)
	go func() {
		total := 0
		defer func() { seen <- total }()
		for {
			var n int
			if err := watch.QueryRow(ctx, notifyLockSQL, app).Scan(&n); err != nil {
				t.Error(err)
				return
			}
			total += n
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			for range commits {
				// Runnable and free: each commit also wakes the workers.
				if err := st.UpdateSession(ctx, s, []store.Event{{Type: "E"}}, &store.UpdateOptions{Tokens: &store.TokenCount{Period: "day", Start: day, N: 1}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	if n := <-seen; n > 0 {
		t.Errorf("the store's connections held or awaited the notify queue's lock %d times in the samples, want never", n)
	}
}

// notified reports whether c holds a notification now, without waiting.
func notified(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// replicaPair opens two stores on one schema, as two replicas, and a
// session created through a, whose creation b has been told of.
func replicaPair(t *testing.T) (a, b *postgres.Store, s *store.Session) {
	t.Helper()
	dsn := postgrestest.DSN(t)
	a, b = open(t, dsn), open(t, dsn)
	ch, cancel := b.Subscribe("s")
	defer cancel()
	s, _, err := a.CreateSession(t.Context(), &store.Session{ID: "s", Owner: "o", Status: "running"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !received(ch) {
		t.Fatal("b was not told of the creation")
	}
	return a, b, s
}

// TestWakeUpsAfterCommit: a commit wakes the subscribers of its own
// process at once, before the notification for the other processes is
// sent (the notifier held here), and those of another process once it
// is, when the commit is visible to it.
func TestWakeUpsAfterCommit(t *testing.T) {
	a, b, s := replicaPair(t)
	ctx := t.Context()
	chA, cancelA := a.Subscribe("s")
	defer cancelA()
	workA, cancelWorkA := a.Subscribe(store.WorkTopic)
	defer cancelWorkA()
	chB, cancelB := b.Subscribe("s")
	defer cancelB()
	release := a.HoldNotifications()
	s.Runnable = true
	if err := a.UpdateSession(ctx, s, []store.Event{{Type: "E"}}, nil); err != nil {
		t.Fatal(err)
	}
	if !notified(chA) || !notified(workA) {
		t.Fatal("the committing process's subscribers were not woken when UpdateSession returned")
	}
	if notified(chB) {
		t.Fatal("b was woken while a's notifier was held")
	}
	release()
	if !received(chB) {
		t.Fatal("b was not woken once a's notifier sent")
	}
	got, err := b.GetSession(ctx, "s")
	if err != nil || got.Version != s.Version {
		t.Fatalf("b's read after its wake-up = version %v (%v), want %d", got.Version, err, s.Version)
	}
	if notified(chA) {
		t.Error("a's subscriber was woken again by its own notification")
	}
}

// TestWakeUpLostWithCrash: a process that commits and dies before its
// notifier sent the notification (its connection closed with it) wakes
// no one itself; the other processes see its notifier's connection gone
// and wake every subscriber, which reads the commit.
func TestWakeUpLostWithCrash(t *testing.T) {
	a, b, s := replicaPair(t)
	ctx := t.Context()
	chB, cancelB := b.Subscribe("s")
	defer cancelB()
	a.HoldNotifications()
	if err := a.UpdateSession(ctx, s, []store.Event{{Type: "E"}}, nil); err != nil {
		t.Fatal(err)
	}
	a.DropNotifications()
	died := time.Now()
	if !received(chB) {
		t.Fatal("b was not woken after a died with a notification unsent")
	}
	t.Logf("b woken %v after a's notifier went away (it looks every second)", time.Since(died).Round(time.Millisecond))
	if got, err := b.GetSession(ctx, "s"); err != nil || got.Version != s.Version {
		t.Fatalf("b's read after its wake-up = %+v, %v; want version %d", got, err, s.Version)
	}
}

// TestNotifierReconnects kills the notifier's connection while it holds a
// notification: its send fails, and it sends it again on a new
// connection. The other processes' look for notifiers gone is turned off
// here, so that only the notification itself can wake b.
func TestNotifierReconnects(t *testing.T) {
	defer postgres.SetPeerCheckEvery(time.Hour)()
	a, b, s := replicaPair(t)
	ctx := t.Context()
	chB, cancelB := b.Subscribe("s")
	defer cancelB()
	old := a.NotifierPID()
	if old == 0 {
		t.Fatal("a's notifier has no connection after it sent a notification")
	}
	release := a.HoldNotifications()
	if err := a.UpdateSession(ctx, s, []store.Event{{Type: "E"}}, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, postgrestest.ServerDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, old); err != nil {
		t.Fatal(err)
	}
	release()
	if !received(chB) {
		t.Fatal("b was not woken: the notification was lost with the notifier's connection")
	}
	if got, err := b.GetSession(ctx, "s"); err != nil || got.Version != s.Version {
		t.Fatalf("b's read after its wake-up = %+v, %v; want version %d", got, err, s.Version)
	}
	if now := a.NotifierPID(); now == old || now == 0 {
		t.Errorf("a's notifier's server process is %d after its connection was killed, want a new one (was %d)", now, old)
	}
}

// TestNotifierOverflow: a notifier that holds more notifications than it
// may sends one that wakes every subscriber of the other processes.
func TestNotifierOverflow(t *testing.T) {
	a, b, _ := replicaPair(t)
	other, cancel := b.Subscribe("other")
	defer cancel()
	release := a.HoldNotifications()
	for i := range postgres.MaxPending + 1 {
		a.Announce(fmt.Sprint("x", i), false)
	}
	if notified(other) {
		t.Fatal("b was woken while a's notifier was held")
	}
	release()
	if !received(other) {
		t.Fatal("b's subscriber of a topic a never announced was not woken by the overflow")
	}
}

// TestUncertainCommitAnnounced: an update whose caller gave up on it
// while it waited for a row lock, and which PostgreSQL then committed
// (nothing tells a server process waiting on a lock that its client
// left), answers with an error; it is announced anyway, a moment later,
// in case it was committed, as it was here.
func TestUncertainCommitAnnounced(t *testing.T) {
	defer postgres.SetPeerCheckEvery(time.Hour)() // only the announcement may wake b
	a, b, s := replicaPair(t)
	ctx := t.Context()
	chB, cancelB := b.Subscribe("s")
	defer cancelB()
	locker, err := pgx.Connect(ctx, postgrestest.WithSearchPath(t, postgrestest.ServerDSN(t), a.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM hrns_sessions WHERE id = 's' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	uctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- a.UpdateSession(uctx, s, []store.Event{{Type: "E"}}, nil) }()
	// The update waits for the lock (bounded: a hang check).
	for i := 0; ; i++ {
		var n int
		if err := locker.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, locker.PgConn().PID()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if i == 1000 {
			t.Fatal("the update never waited for the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("UpdateSession whose context ended while it waited = nil, want an error")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !received(chB) {
		t.Fatal("b was not woken: the uncertain commit was not announced")
	}
	// Whether PostgreSQL committed the update or cancelled it is a race
	// between pgx's cancel request and the lock's release: that is what
	// makes it uncertain. Either way b, woken, reads what is stored.
	got, err := b.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	if err := locker.QueryRow(ctx, `SELECT version FROM hrns_sessions WHERE id = 's'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if got.Version != stored || stored != s.Version && stored != s.Version+1 {
		t.Fatalf("b's read after its wake-up = version %d, stored %d (was %d)", got.Version, stored, s.Version)
	}
}
