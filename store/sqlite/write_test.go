package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/store"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// holdWriter starts a write that blocks until release is called, and
// returns once it runs: the writes started after it queue behind it and
// are committed together when it is released.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	running, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
			close(running)
			<-gate
			return nil
		})
	}()
	<-running
	return func() {
		close(gate)
		if err := <-done; err != nil {
			t.Errorf("the holding write: %v", err)
		}
	}
}

// createTable creates the table t (k INTEGER PRIMARY KEY) the tests write.
func createTable(t *testing.T, s *Store) {
	t.Helper()
	if err := s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// waitQueued waits until n writes are queued.
func waitQueued(s *Store, n int) {
	for {
		s.wmu.Lock()
		q := len(s.queue)
		s.wmu.Unlock()
		if q >= n {
			return
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommit queues writes behind a held one and checks that they are
// committed in one batch in which each succeeds or fails alone: a write
// that returns an error, one that panics and one whose caller gave up
// before it ran leave nothing behind and fail with their own errors; the
// others are committed and readable once they return.
func TestGroupCommit(t *testing.T) {
	s := openTest(t)
	var mu sync.Mutex
	var batches []int
	s.batchHook = func(n int) { mu.Lock(); batches = append(batches, n); mu.Unlock() }
	createTable(t, s)
	release := holdWriter(t, s)
	const n = 10
	errBoom := errors.New("boom")
	cancelled, cancel := context.WithCancel(context.Background())
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ctx := context.Background()
		if i == 7 {
			ctx = cancelled
		}
		wg.Go(func() {
			errs[i] = s.write(ctx, func(ctx context.Context, tx *writeTx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, i); err != nil {
					return err
				}
				switch i {
				case 3:
					return errBoom
				case 5:
					panic("write 5")
				}
				return nil
			})
		})
		waitQueued(s, i+1) // in order
	}
	cancel()
	release()
	wg.Wait()
	for i, err := range errs {
		switch i {
		case 3:
			if !errors.Is(err, errBoom) {
				t.Errorf("write 3: %v, want boom", err)
			}
		case 5:
			if err == nil || !strings.Contains(err.Error(), "panicked: write 5") {
				t.Errorf("write 5: %v, want its panic", err)
			}
		case 7:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("write 7: %v, want context.Canceled", err)
			}
		default:
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		}
	}
	rows, err := s.r.Query(`SELECT k FROM t ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var k int
		rows.Scan(&k)
		got = append(got, fmt.Sprint(k))
	}
	rows.Close()
	if g := strings.Join(got, ","); g != "0,1,2,4,6,8,9" {
		t.Errorf("committed rows %s, want 0,1,2,4,6,8,9", g)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 1, n}; fmt.Sprint(batches) != fmt.Sprint(want) {
		t.Errorf("batches %v, want %v (the table, the held write, then the ten together)", batches, want)
	}
}

// TestGroupCommitLostTransaction: a write that ends the transaction itself
// (as SQLite does on an I/O error or a full disk) fails the writes
// committed alongside it, none of which is left behind, and the store goes
// on.
func TestGroupCommitLostTransaction(t *testing.T) {
	s := openTest(t)
	createTable(t, s)
	release := holdWriter(t, s)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			errs[i] = s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, i); err != nil {
					return err
				}
				if i == 1 {
					tx.ExecContext(ctx, `ROLLBACK`)
					return errors.New("disk I/O error")
				}
				return nil
			})
		})
		waitQueued(s, i+1)
	}
	release()
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rolled back with a write committed alongside") {
		t.Errorf("write 0: %v, want rolled back with the batch", errs[0])
	}
	for i := 1; i < 3; i++ {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), "disk I/O error") {
			t.Errorf("write %d: %v, want the I/O error", i, errs[i])
		}
	}
	var count int
	if err := s.r.QueryRow(`SELECT count(*) FROM t`).Scan(&count); err != nil || count != 0 {
		t.Errorf("rows left: %d (%v), want 0", count, err)
	}
	if err := s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (42)`)
		return err
	}); err != nil {
		t.Errorf("a write after: %v", err)
	}
}

// TestGroupCommitSessions runs the store's own updates in one batch: of
// ten sessions' updates, those made on a stale version fail with
// ErrConflict and write none of their events; the others are committed
// with theirs.
func TestGroupCommitSessions(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	var mu sync.Mutex
	var batches []int
	s.batchHook = func(n int) { mu.Lock(); batches = append(batches, n); mu.Unlock() }
	const n = 10
	sessions := make([]*store.Session, n)
	for i := range n {
		sessions[i] = &store.Session{ID: fmt.Sprintf("s%d", i), Owner: "k", Status: "running", Agent: "a", State: []byte(`{}`)}
		got, _, err := s.CreateSession(ctx, sessions[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = got
	}
	mu.Lock()
	batches = nil
	mu.Unlock()
	release := holdWriter(t, s)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, sess := range sessions {
		if i%2 == 1 {
			sess.Version-- // stale
		}
		sess.Status = "idle"
		wg.Go(func() {
			errs[i] = s.UpdateSession(ctx, sess, []store.Event{{Type: "x", Data: []byte(`{"i":1}`)}, {Type: "y", Data: []byte(`{}`)}}, nil)
		})
		waitQueued(s, i+1)
	}
	release()
	wg.Wait()
	for i := range n {
		got, err := s.GetSession(ctx, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		events, err := s.Events(ctx, got.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if !errors.Is(errs[i], store.ErrConflict) || got.Status != "running" || got.Version != 1 || len(events) != 0 {
				t.Errorf("stale update %d: %v; stored %s v%d with %d events", i, errs[i], got.Status, got.Version, len(events))
			}
			continue
		}
		if errs[i] != nil || got.Status != "idle" || got.Version != 2 || got.EventCount != 2 || len(events) != 2 {
			t.Errorf("update %d: %v; stored %s v%d, %d events counted, %d read", i, errs[i], got.Status, got.Version, got.EventCount, len(events))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(batches) != fmt.Sprint([]int{1, n}) {
		t.Errorf("batches %v, want [1 %d]", batches, n)
	}
}

// TestGroupCommitUnreadStatement: a write that leaves a result set open
// (an INSERT ... RETURNING read in part, a row never scanned, rows left
// open by a write that fails) fails neither itself nor the writes
// committed alongside it: the batch closes what each write left open
// before it releases or rolls back the write's savepoint. SQLite refuses
// to release a savepoint while a writing statement is unfinished, so
// before, every write of the batch failed with "cannot release savepoint
// - SQL statements in progress".
func TestGroupCommitUnreadStatement(t *testing.T) {
	errLeft := errors.New("fails with rows open")
	writes := []func(ctx context.Context, tx *writeTx) error{
		func(ctx context.Context, tx *writeTx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (1)`)
			return err
		},
		func(ctx context.Context, tx *writeTx) error { // two rows, one read
			rows, err := tx.QueryContext(ctx, `INSERT INTO t (k) VALUES (2), (3) RETURNING k`)
			if err != nil {
				return err
			}
			if !rows.Next() {
				return rows.Err()
			}
			return nil
		},
		func(ctx context.Context, tx *writeTx) error { // a row never scanned
			tx.QueryRowContext(ctx, `INSERT INTO t (k) VALUES (4) RETURNING k`)
			return nil
		},
		func(ctx context.Context, tx *writeTx) error { // rolled back
			if _, err := tx.QueryContext(ctx, `INSERT INTO t (k) VALUES (5) RETURNING k`); err != nil {
				return err
			}
			return errLeft
		},
		func(ctx context.Context, tx *writeTx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (6)`)
			return err
		},
	}
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			s := openTest(t)
			var mu sync.Mutex
			var batches []int
			s.batchHook = func(n int) { mu.Lock(); batches = append(batches, n); mu.Unlock() }
			createTable(t, s)
			release := func() {}
			if batched {
				release = holdWriter(t, s)
			}
			errs := make([]error, len(writes))
			var wg sync.WaitGroup
			for i, w := range writes {
				if !batched {
					errs[i] = s.write(context.Background(), w)
					continue
				}
				wg.Go(func() { errs[i] = s.write(context.Background(), w) })
				waitQueued(s, i+1)
			}
			release()
			wg.Wait()
			for i, err := range errs {
				if want := error(nil); i == 3 {
					want = errLeft
					if !errors.Is(err, want) {
						t.Errorf("write %d: %v, want %v", i, err, want)
					}
				} else if err != nil {
					t.Errorf("write %d: %v", i, err)
				}
			}
			var got []string
			rows, err := s.r.Query(`SELECT k FROM t ORDER BY k`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k int
				rows.Scan(&k)
				got = append(got, fmt.Sprint(k))
			}
			rows.Close()
			if g := strings.Join(got, ","); g != "1,2,3,4,6" {
				t.Errorf("committed rows %s, want 1,2,3,4,6", g)
			}
			mu.Lock()
			defer mu.Unlock()
			if batched && fmt.Sprint(batches) != fmt.Sprint([]int{1, 1, len(writes)}) {
				t.Errorf("batches %v, want the table, the held write, then the %d together", batches, len(writes))
			}
		})
	}
}

// TestWriterReopened: a write that ends the transaction itself leaves the
// writer connection in a state the store does not know (here, a pragma
// that makes it refuse every write); the store discards it and the next
// write runs on a new connection, with the store's own pragmas.
func TestWriterReopened(t *testing.T) {
	s := openTest(t)
	createTable(t, s)
	err := s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
		if _, err := tx.ExecContext(ctx, `ROLLBACK`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `PRAGMA query_only = ON`)
		return err
	})
	if err == nil {
		t.Fatal("a write whose transaction was ended under it: committed")
	}
	for i := range 3 {
		if err := s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, i)
			return err
		}); err != nil {
			t.Fatalf("write %d after: %v", i, err)
		}
	}
	var fk int
	if err := s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
		return tx.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk)
	}); err != nil || fk != 1 {
		t.Errorf("foreign_keys on the new connection: %d (%v), want 1", fk, err)
	}
}

// TestCloseWithWritesInFlight: Close waits for the writes it finds in
// flight or queued, which commit, and the writes after it answer
// store.ErrClosed. Close used to close the writer connection and its
// statements under a commit in flight (a data race, then a nil
// statement's panic in the next write: hrns serve's schedule worker,
// stopped after its store in TestServingStopHungStore).
func TestCloseWithWritesInFlight(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, s)
	release := holdWriter(t, s)
	queued := make(chan error, 1)
	go func() {
		queued <- s.write(context.Background(), func(ctx context.Context, tx *writeTx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (1)`)
			return err
		})
	}()
	waitQueued(s, 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for { // Close has begun
		s.wmu.Lock()
		began := s.wclosed
		s.wmu.Unlock()
		if began {
			break
		}
		time.Sleep(time.Millisecond)
	}
	whileClosing := make(chan error, 1)
	go func() {
		whileClosing <- s.write(context.Background(), func(context.Context, *writeTx) error { return nil })
	}()
	select {
	case err := <-closed:
		t.Errorf("Close returned (%v) with a write in flight", err)
	default:
	}
	release()
	if err := <-queued; err != nil {
		t.Errorf("the write queued before Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-whileClosing; !errors.Is(err, store.ErrClosed) {
		t.Errorf("a write while Close waits: %v, want ErrClosed", err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := s.write(context.Background(), func(context.Context, *writeTx) error { return nil }); !errors.Is(err, store.ErrClosed) {
				t.Errorf("a write after Close: %v, want ErrClosed", err)
			}
		})
	}
	wg.Wait()
}
