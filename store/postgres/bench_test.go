package postgres_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

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
