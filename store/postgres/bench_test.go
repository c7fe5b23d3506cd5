package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// The benchmarks mirror those of store/sqlite, on the test server.

func benchStore(b *testing.B) *postgres.Store {
	b.Helper()
	st, err := postgres.Open(b.Context(), postgrestest.DSN(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkUpdateSession measures one committed change with one event
// (and its notification).
func BenchmarkUpdateSession(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	s, _, err := st.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Status: "running", State: json.RawMessage(`{"phase":"run"}`)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev := []store.Event{{Type: "AgentEvent", Data: json.RawMessage(`{"kind":"message_event","caller_id":"user","content":["hi"]}`)}}
	for b.Loop() {
		if err := st.UpdateSession(ctx, s, ev, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetSession measures one read.
func BenchmarkGetSession(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	if _, _, err := st.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Status: "running", State: json.RawMessage(`{"phase":"run"}`)}, nil); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := st.GetSession(ctx, "s"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateSession measures creating a session with one event.
func BenchmarkCreateSession(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	ev := []store.Event{{Type: "AgentEvent", Data: json.RawMessage(`{"kind":"message_event","caller_id":"user","content":["hi"]}`)}}
	i := 0
	for b.Loop() {
		i++
		if _, _, err := st.CreateSession(ctx, &store.Session{ID: fmt.Sprint("s", i), Owner: "o", Status: "pending", Runnable: true, State: json.RawMessage(`{"phase":"new"}`)}, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWakeUp measures a commit through one store reaching a
// subscriber of another, as between two replicas.
func BenchmarkWakeUp(b *testing.B) {
	dsn := postgrestest.DSN(b)
	open := func() *postgres.Store {
		st, err := postgres.Open(b.Context(), dsn, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}
	writer, reader := open(), open()
	ctx := b.Context()
	s, _, err := writer.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Status: "running"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ch, cancel := reader.Subscribe("s")
	defer cancel()
	for b.Loop() {
		if err := writer.UpdateSession(ctx, s, []store.Event{{Type: "E"}}, nil); err != nil {
			b.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			b.Fatal("no wake-up")
		}
	}
}

// BenchmarkTokenCommitsOneKey measures commits that count tokens, of
// sessions of one key, from 16 connections at once: conc goroutines,
// each committing a session of its own. It also reports how many of the
// store's server processes waited on a lock, on average over samples
// taken every millisecond (lock-waiting): with the key's count in one row,
// each commit waited for the one before it to be durable, and so it did
// on the notify queue's lock while each commit notified in its
// transaction (13 to 14 of 16 waiting; now the stripes' rows, below 1).
func BenchmarkTokenCommitsOneKey(b *testing.B) {
	for _, conc := range []int{16, 256} {
		b.Run(fmt.Sprint("conc=", conc), func(b *testing.B) {
			dsn := postgrestest.DSN(b) + "&application_name=hrns_bench_tokens"
			st, err := postgres.Open(b.Context(), dsn, &postgres.Options{MaxConns: 16})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := b.Context()
			day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			sessions := make([]*store.Session, conc)
			for i := range sessions {
				if sessions[i], _, err = st.CreateSession(ctx, &store.Session{ID: fmt.Sprint("s", i), Owner: "key", Status: "running", State: json.RawMessage(`{}`)}, nil); err != nil {
					b.Fatal(err)
				}
			}
			watch, err := pgx.Connect(ctx, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer watch.Close(context.Background())
			stop := make(chan struct{})
			sampled := make(chan [2]int, 1)
			go func() {
				var samples, waiting int
				defer func() { sampled <- [2]int{samples, waiting} }()
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					var n int
					if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hrns_bench_tokens' AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
						return
					}
					samples, waiting = samples+1, waiting+n
				}
			}()
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, s := range sessions {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := st.UpdateSession(ctx, s, nil, &store.UpdateOptions{Tokens: &store.TokenCount{Period: "day", Start: day, N: 7}}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			close(stop)
			got := <-sampled
			if got[0] > 0 {
				b.ReportMetric(float64(got[1])/float64(got[0]), "lock-waiting")
			}
			if used, err := st.TokensUsed(ctx, "key", "day", day); err != nil || used != 7*int64(b.N) {
				b.Fatalf("TokensUsed = %d, %v; want %d", used, err, 7*b.N)
			}
		})
	}
}
