package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// quotaTests are the subtests of [store.Quotas].
var quotaTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"QuotaTokens", testQuotaTokens},
	{"QuotaTokensConcurrent", testQuotaTokensConcurrent},
	{"QuotaTokensWithUpdate", testQuotaTokensWithUpdate},
}

func testQuotaTokens(t *testing.T, st store.Store) {
	ctx := t.Context()
	day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	next := day.AddDate(0, 0, 1)
	used := func(owner, period string, start time.Time) int64 {
		t.Helper()
		n, err := st.TokensUsed(ctx, owner, period, start)
		if err != nil {
			t.Fatalf("TokensUsed(%s, %s, %v) = %v", owner, period, start, err)
		}
		return n
	}
	add := func(owner, period string, start time.Time, n int64) int64 {
		t.Helper()
		total, err := st.AddTokens(ctx, owner, period, start, n)
		if err != nil {
			t.Fatalf("AddTokens(%s, %s, %v, %d) = %v", owner, period, start, n, err)
		}
		return total
	}
	if got := used("alice", "day", day); got != 0 {
		t.Errorf("a window nothing was added to: %d tokens, want 0", got)
	}
	if got := add("alice", "day", day, 1200); got != 1200 {
		t.Errorf("first AddTokens total = %d, want 1200", got)
	}
	if got := add("alice", "day", day, 56); got != 1256 {
		t.Errorf("second AddTokens total = %d, want 1256", got)
	}
	if got := add("alice", "day", day, 0); got != 1256 {
		t.Errorf("adding 0: total %d, want 1256", got)
	}
	// Windows, periods and owners are counted apart.
	add("alice", "day", next, 7)
	add("alice", "month", day, 9)
	add("bob", "day", day, 11)
	// A start given in another zone, or with nanoseconds below the
	// microsecond, names the same window.
	if got := add("alice", "day", day.In(time.FixedZone("UTC+2", 7200)).Add(300*time.Nanosecond), 4); got != 1260 {
		t.Errorf("the same window in another zone: total %d, want 1260", got)
	}
	for _, c := range []struct {
		owner, period string
		start         time.Time
		want          int64
	}{
		{"alice", "day", day, 1260},
		{"alice", "day", next, 7},
		{"alice", "month", day, 9},
		{"bob", "day", day, 11},
		{"bob", "month", day, 0},
		{"carol", "day", day, 0},
	} {
		if got := used(c.owner, c.period, c.start); got != c.want {
			t.Errorf("TokensUsed(%s, %s, %v) = %d, want %d", c.owner, c.period, c.start, got, c.want)
		}
	}
	if _, err := st.AddTokens(ctx, "alice", "day", day, -1); !errors.Is(err, store.ErrNegativeTokens) {
		t.Errorf("AddTokens(-1) = %v, want ErrNegativeTokens", err)
	}
	if got := used("alice", "day", day); got != 1260 {
		t.Errorf("after a refused negative addition: %d tokens, want 1260", got)
	}
}

// testQuotaTokensConcurrent: concurrent additions all count.
func testQuotaTokensConcurrent(t *testing.T, st store.Store) {
	ctx := t.Context()
	day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				if _, err := st.AddTokens(ctx, "alice", "day", day, 3); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := st.TokensUsed(ctx, "alice", "day", day)
	if err != nil {
		t.Fatal(err)
	}
	if got != workers*each*3 {
		t.Errorf("after %d concurrent additions of 3: %d tokens, want %d", workers*each, got, workers*each*3)
	}
}

// testQuotaTokensWithUpdate: UpdateOptions.Tokens counts into the
// session owner's window in the update's transaction: an update that
// writes nothing counts nothing, and its retry counts once.
func testQuotaTokensWithUpdate(t *testing.T, st store.Store) {
	ctx := t.Context()
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	used := func(owner string) int64 {
		t.Helper()
		n, err := st.TokensUsed(ctx, owner, "day", day)
		if err != nil {
			t.Fatalf("TokensUsed(%s) = %v", owner, err)
		}
		return n
	}
	s := newSession("tok", "carol")
	s.Runnable = true
	mustCreate(t, st, s)
	if _, err := st.Claim(ctx, &store.ClaimParams{Owner: "w1", Now: time.Now(), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.GetSession(ctx, "tok")
	if err != nil {
		t.Fatal(err)
	}
	tokens := func(n int64) *store.TokenCount { return &store.TokenCount{Period: "day", Start: day, N: n} }
	stale := *cur

	// Written: counted, to the session's owner.
	cur.Status = "running"
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w1", Tokens: tokens(500)}); err != nil {
		t.Fatalf("update with tokens: %v", err)
	}
	if got := used("carol"); got != 500 {
		t.Errorf("after a written update: %d tokens, want 500", got)
	}
	// Refused for its version, its lease or a negative count: nothing
	// is counted, nothing written.
	if err := st.UpdateSession(ctx, &stale, nil, &store.UpdateOptions{Lease: "w1", Tokens: tokens(70)}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale update = %v, want ErrConflict", err)
	}
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w2", Tokens: tokens(70)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("update with another's lease = %v, want ErrLeaseLost", err)
	}
	version := cur.Version
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w1", Tokens: tokens(-1)}); !errors.Is(err, store.ErrNegativeTokens) {
		t.Errorf("update with -1 tokens = %v, want ErrNegativeTokens", err)
	}
	if got := used("carol"); got != 500 {
		t.Errorf("after refused updates: %d tokens, want 500", got)
	}
	if got, err := st.GetSession(ctx, "tok"); err != nil || got.Version != version {
		t.Errorf("after refused updates: version %v (%v), want %d", got.Version, err, version)
	}
	// The retry, read again, counts once; zero counts nothing; the
	// window adds to what AddTokens added.
	if _, err := st.AddTokens(ctx, "carol", "day", day, 5); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w1", Tokens: tokens(70)}); err != nil {
		t.Fatalf("retried update: %v", err)
	}
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Tokens: tokens(0)}); err != nil {
		t.Fatalf("update with 0 tokens: %v", err)
	}
	if got := used("carol"); got != 575 {
		t.Errorf("after the retry: %d tokens, want 575", got)
	}
	if got, err := st.TokensUsed(ctx, "w1", "day", day); err != nil || got != 0 {
		t.Errorf("the lease holder's count: %d (%v), want 0", got, err)
	}
}
