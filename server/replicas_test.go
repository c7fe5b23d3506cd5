package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// replicaStore is a store that keeps replicas in memory, and whose
// heartbeats fail while failing is set.
type replicaStore struct {
	store.Store

	mu      sync.Mutex
	recs    map[string]store.Replica
	failing bool
}

func (r *replicaStore) Beat(_ context.Context, rec *store.Replica) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing {
		return errors.New("database unreachable")
	}
	if r.recs == nil {
		r.recs = map[string]store.Replica{}
	}
	r.recs[rec.ID] = *rec
	return nil
}

func (r *replicaStore) Replicas(context.Context, time.Time) ([]*store.Replica, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*store.Replica
	for _, rec := range r.recs {
		out = append(out, &rec)
	}
	return out, nil
}

func (r *replicaStore) Leave(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.recs, id)
	return nil
}

func (r *replicaStore) fail(v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = v
}

type health struct {
	Status, Replica, Detail string
}

func TestReplicas(t *testing.T) {
	tests := []struct {
		name     string
		replicas bool // the store keeps replicas
	}{
		{"one process", false},
		{"shared store", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &replicaStore{}
			o := &envOptions{session: &session.Options{ReplicaID: "replica-1", LeaseTTL: 300 * time.Millisecond}}
			if tt.replicas {
				o.wrap = func(st store.Store) store.Store { rs.Store = st; return rs }
			}
			e := newEnv(t, o)
			var h health
			e.expect(e.do("GET", "/healthz", "", nil), http.StatusOK).json(&h)
			if h != (health{Status: "ok", Replica: "replica-1"}) {
				t.Errorf("/healthz = %+v", h)
			}
			e.expect(e.do("GET", "/api/v2/replicas", "", nil), http.StatusUnauthorized)
			var list struct{ Items []session.Replica }
			for range 500 {
				e.expect(e.do("GET", "/api/v2/replicas", keyAlice, nil), http.StatusOK).json(&list)
				if len(list.Items) > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond) // the first heartbeat
			}
			if len(list.Items) != 1 {
				t.Fatalf("replicas = %+v, want this one", list.Items)
			}
			if r := list.Items[0]; r.ID != "replica-1" || !r.Self || !r.Healthy || r.Workers != 64 || r.PID == 0 {
				t.Errorf("replica = %+v", r)
			}
			if !tt.replicas {
				return
			}
			// A replica that cannot record its heartbeat for a lease TTL
			// tells its load balancer.
			rs.fail(true)
			for range 500 {
				if r := e.do("GET", "/healthz", "", nil); r.status == http.StatusServiceUnavailable {
					r.json(&h)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if h.Status != "unhealthy" || h.Replica != "replica-1" || h.Detail == "" {
				t.Errorf("/healthz while heartbeats fail = %+v", h)
			}
			rs.fail(false)
			for range 500 {
				if e.do("GET", "/healthz", "", nil).status == http.StatusOK {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Error("/healthz did not recover with the heartbeats")
		})
	}
}

// TestLeaseShown checks that GET /api/v2/sessions/{id} names the replica
// running a session while it runs (in the Hrns-Lease header: the body is
// the reference's Session), and nothing once it waits.
func TestLeaseShown(t *testing.T) {
	inModel := make(chan struct{})
	release := make(chan struct{})
	e := newEnv(t, &envOptions{session: &session.Options{ReplicaID: "replica-7"}},
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			close(inModel)
			<-release
			return calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`))
		}})
	id := e.create(keyAlice, orderAgent)
	<-inModel
	lease := e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).header.Get("Hrns-Lease")
	if !strings.HasPrefix(lease, `replica="replica-7"; until="`) {
		t.Errorf("lease of a running session = %q, want replica-7's", lease)
	}
	close(release)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	for range 500 {
		lease = e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).header.Get("Hrns-Lease")
		if lease == "" {
			return
		}
		time.Sleep(10 * time.Millisecond) // the worker releases after its last commit
	}
	t.Errorf("lease of a waiting session = %q, want none", lease)
}
