package session_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// opsStore counts the store's calls.
type opsStore struct {
	store.Store
	updates, gets atomic.Int64
}

func (c *opsStore) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	c.updates.Add(1)
	return c.Store.UpdateSession(ctx, s, events, opts)
}

func (c *opsStore) GetSession(ctx context.Context, id string) (*store.Session, error) {
	c.gets.Add(1)
	return c.Store.GetSession(ctx, id)
}

// BenchmarkTurn runs sessions of 6 model turns (5 calls of a client-side
// tool whose result is posted, then the answer), 16 at once, on a SQLite
// store (synchronous = FULL, as hrns serve runs it), as the driver's
// throughput job does without HTTP, and reports per model turn: the
// process's CPU (the manager, the store, the loop and the posting), its
// allocations and bytes allocated, the store's writes and session reads,
// and the session states decoded:
//
//	go test -run '^$' -bench '^BenchmarkTurn$' -benchtime 20x ./session/
func BenchmarkTurn(b *testing.B) {
	const turns, atOnce = 6, 16
	result := json.RawMessage(`"ok"`)
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	st := &opsStore{Store: db}
	m := session.New(st, turnsModel{turns: turns}, &session.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer m.Stop(context.Background())
	body := `{"agent":{"name":"a","system":"You read files.","tools":[{"name":"read_file","description":"Reads a file."}]},"max_steps":1000,"messages":"Read a.txt."}`
	var req session.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var ms0, ms1 runtime.MemStats
	b.ResetTimer()
	runtime.ReadMemStats(&ms0)
	cpu0, up0, get0, dec0 := cpuTime(), st.updates.Load(), st.gets.Load(), session.StatesDecoded()
	for range b.N {
		var wg sync.WaitGroup
		for range atOnce {
			wg.Go(func() { runLong(b, ctx, m, &req, json.RawMessage(body), turns, result) })
		}
		wg.Wait()
	}
	cpu, up, get, dec := cpuTime()-cpu0, st.updates.Load()-up0, st.gets.Load()-get0, session.StatesDecoded()-dec0
	runtime.ReadMemStats(&ms1)
	b.StopTimer()
	n := float64(b.N * atOnce * turns)
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/turn")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/turn")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/n, "B/turn")
	b.ReportMetric(float64(up)/n, "updates/turn")
	b.ReportMetric(float64(get)/n, "gets/turn")
	b.ReportMetric(float64(dec)/n, "decodes/turn")
}
