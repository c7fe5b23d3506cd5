package sqlite_test

import (
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// BenchmarkUpdateSession measures one committed change with one event.
func BenchmarkUpdateSession(b *testing.B) {
	eachSync(b, func(b *testing.B, st *sqlite.Store) {
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
	})
}

// BenchmarkGetSession measures one read.
func BenchmarkGetSession(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
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

// BenchmarkWake measures the two commits of a session woken by a
// caller's message, one op each pair: the caller's input, which makes
// the paused session runnable and claims it (UpdateOptions.Claim, as
// session.Manager's input does), then the worker's step, under its
// lease, which pauses it again and releases the lease. One event each;
// the owner has no webhook. It reports the process's CPU per pair
// (cpu-µs/op: the disk's waits are not CPU).
func BenchmarkWake(b *testing.B) {
	eachSync(b, func(b *testing.B, st *sqlite.Store) {
		ctx := b.Context()
		s, _, err := st.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Agent: "a", Status: "idle", State: json.RawMessage(`{"phase":"wait"}`)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		msg := []store.Event{{Type: "AgentEvent", Data: json.RawMessage(`{"kind":"message_event","caller_id":"user","content":["hi"]}`)}}
		step := []store.Event{{Type: "AgentEvent", Data: json.RawMessage(`{"kind":"message_event","caller_id":"assistant","content":["hello"]}`)}}
		cpu0 := cpuTime()
		for b.Loop() {
			s.Status, s.Runnable, s.State = "running", true, json.RawMessage(`{"phase":"run"}`)
			claim := &store.ClaimParams{Owner: "w", Token: "t", Now: time.Now(), TTL: time.Minute, BelowAttempts: 3}
			if err := st.UpdateSession(ctx, s, msg, &store.UpdateOptions{Claim: claim}); err != nil {
				b.Fatal(err)
			}
			if s.LeaseOwner != "w" {
				b.Fatal("the input did not claim the session")
			}
			s.Status, s.Runnable, s.State = "idle", false, json.RawMessage(`{"phase":"wait"}`)
			if err := st.UpdateSession(ctx, s, step, &store.UpdateOptions{Lease: "w", Release: true}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

// eachSync runs f on a fresh store with synchronous = FULL, then on one
// with NORMAL (Options.RelaxedSync), each as a sub-benchmark.
func eachSync(b *testing.B, f func(b *testing.B, st *sqlite.Store)) {
	for _, relaxed := range []bool{false, true} {
		name := "sync=FULL"
		if relaxed {
			name = "sync=NORMAL"
		}
		b.Run(name, func(b *testing.B) {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: relaxed})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			f(b, st)
		})
	}
}

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
