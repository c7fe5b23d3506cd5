package sqlite_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// BenchmarkUpdateSession measures one committed change with one event.
func BenchmarkUpdateSession(b *testing.B) {
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
