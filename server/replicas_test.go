package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
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

// keyOperator is the operator key of the replicas tests: it reads the
// operator routes (the replicas, /healthz's details) and nothing else.
const keyOperator = "sk-operator"

// healthOf reads GET /healthz with key ("" for none, as a load
// balancer asks) and checks that without the operator key it says the
// health alone: not which replica answers (whose ID names its host), nor
// why it is unhealthy.
func healthOf(e *env, key string) (int, health) {
	e.t.Helper()
	r := e.do("GET", "/healthz", key, nil)
	var h health
	r.json(&h)
	if key != keyOperator {
		var fields map[string]any
		r.json(&fields)
		if len(fields) != 1 || fields["status"] == nil {
			e.t.Errorf("GET /healthz with key %q answered %d %s; want the status alone", key, r.status, r.body)
		}
	}
	return r.status, h
}

// notRouted checks that a request to path with key gets exactly what the
// same request to a route that does not exist gets: status, body and the
// headers that could tell them apart.
func notRouted(e *env, method, path, key string) {
	e.t.Helper()
	got, want := e.do(method, path, key, nil), e.do(method, "/api/v2/no-such-route", key, nil)
	if got.status != want.status || string(got.body) != string(want.body) ||
		got.header.Get("Allow") != want.header.Get("Allow") || got.header.Get("WWW-Authenticate") != want.header.Get("WWW-Authenticate") {
		e.t.Errorf("%s %s with key %q answered %d %v %s; a route that does not exist %d %v %s", method, path, key, got.status, got.header, got.body, want.status, want.header, want.body)
	}
	if got.status != http.StatusNotFound {
		e.t.Errorf("%s %s with key %q answered %d, want 404", method, path, key, got.status)
	}
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
			o := &envOptions{session: &session.Options{ReplicaID: "replica-1", LeaseTTL: 300 * time.Millisecond},
				server: &server.Options{OperatorKeys: []string{keyOperator}}}
			if tt.replicas {
				o.wrap = func(st store.Store) store.Store { rs.Store = st; return rs }
			}
			e := newEnv(t, o)
			for _, key := range []string{"", keyAlice, "sk-wrong"} {
				if status, h := healthOf(e, key); status != http.StatusOK || h != (health{Status: "ok"}) {
					t.Errorf("/healthz with key %q = %d %+v", key, status, h)
				}
			}
			if status, h := healthOf(e, keyOperator); status != http.StatusOK || h != (health{Status: "ok", Replica: "replica-1"}) {
				t.Errorf("/healthz with the operator key = %d %+v", status, h)
			}
			// A tenant, a stranger and the anonymous are told no more
			// than that the route does not exist.
			for _, key := range []string{"", keyAlice, keyBob, "sk-wrong"} {
				for _, method := range []string{"GET", "HEAD", "POST", "DELETE"} {
					notRouted(e, method, "/api/v2/replicas", key)
				}
			}
			e.expect(e.do("POST", "/api/v2/replicas", keyOperator, nil), http.StatusMethodNotAllowed)
			var list struct{ Items []session.Replica }
			for range 500 {
				e.expect(e.do("GET", "/api/v2/replicas", keyOperator, nil), http.StatusOK).json(&list)
				if len(list.Items) > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond) // the first heartbeat
			}
			if len(list.Items) != 1 {
				t.Fatalf("replicas = %+v, want this one", list.Items)
			}
			if r := list.Items[0]; r.ID != "replica-1" || !r.Self || !r.Healthy || r.Workers != 64 || r.PID == 0 || r.Host == "" {
				t.Errorf("replica = %+v", r)
			}
			if !tt.replicas {
				return
			}
			// A replica that cannot record its heartbeat for a lease TTL
			// tells its load balancer, and the operator why.
			rs.fail(true)
			for range 500 {
				if status, _ := healthOf(e, ""); status == http.StatusServiceUnavailable {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if status, h := healthOf(e, ""); status != http.StatusServiceUnavailable || h != (health{Status: "unhealthy"}) {
				t.Errorf("/healthz while heartbeats fail = %d %+v", status, h)
			}
			if status, h := healthOf(e, keyOperator); status != http.StatusServiceUnavailable || h.Status != "unhealthy" || h.Replica != "replica-1" || h.Detail == "" {
				t.Errorf("/healthz with the operator key while heartbeats fail = %d %+v", status, h)
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

// TestOperatorKeyIsNotATenantKey: an operator key opens the operator
// routes and nothing else: it creates and lists no session, and does not
// log in to the web page.
func TestOperatorKeyIsNotATenantKey(t *testing.T) {
	e := newEnv(t, &envOptions{server: &server.Options{OperatorKeys: []string{keyOperator}}})
	e.expect(e.do("POST", "/api/v2/sessions", keyOperator, orderAgent), http.StatusUnauthorized)
	e.expect(e.do("GET", "/api/v2/sessions", keyOperator, nil), http.StatusUnauthorized)
	e.expect(e.do("GET", "/api/v2/agents", keyOperator, nil), http.StatusUnauthorized)
	e.expect(e.do("GET", "/api/v2/quota/tokens", keyOperator, nil), http.StatusUnauthorized)
	e.expect(e.do("POST", "/ui/login", "", map[string]string{"key": keyOperator}), http.StatusUnauthorized)
	e.expect(e.do("GET", "/api/v2/replicas", keyOperator, nil), http.StatusOK)
	// and a tenant key opens no operator route.
	e.create(keyAlice, orderAgent)
	notRouted(e, "GET", "/api/v2/replicas", keyAlice)
}

// TestReplicasWithoutOperatorKey: a server with API keys and no
// operator key serves the replicas to nobody, and /healthz says the
// health alone to everyone.
func TestReplicasWithoutOperatorKey(t *testing.T) {
	e := newEnv(t, &envOptions{session: &session.Options{ReplicaID: "replica-1"}})
	for _, key := range []string{"", keyAlice, keyBob} {
		notRouted(e, "GET", "/api/v2/replicas", key)
		if status, h := healthOf(e, key); status != http.StatusOK || h != (health{Status: "ok"}) {
			t.Errorf("/healthz with key %q = %d %+v", key, status, h)
		}
	}
}

// TestReplicasWithoutKeys: a server without any key (on its own
// machine's loopback, hrns serve's default) has one user, who is its
// operator too: the replicas and /healthz's details are theirs.
func TestReplicasWithoutKeys(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: "http://127.0.0.1:1", Model: "m"}, &session.Options{ReplicaID: "replica-1"})
	srv := httptest.NewServer(newServer(m, nil))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{"/healthz": `"replica":"replica-1"`, "/api/v2/replicas": `"id":"replica-1"`} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body json.RawMessage
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s without keys: %d %s; want 200 with %s", path, resp.StatusCode, body, want)
		}
	}
}

// TestOperatorKeyInBothLists: a key that is both an API key and an
// operator key is refused when the server is made, with an error a
// library user can handle (not a panic): which role the key has would
// otherwise depend on the route.
func TestOperatorKeyInBothLists(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: "http://127.0.0.1:1", Model: "m"}, nil)
	s, err := server.New(m, &server.Options{APIKeys: []string{keyAlice, "sk-both"}, OperatorKeys: []string{"sk-both"}})
	if err == nil || s != nil || !strings.Contains(err.Error(), "both an API key and an operator key") || strings.Contains(err.Error(), "sk-both") {
		t.Errorf("server.New with a key in both lists: %v, %v; want no server and an error that says so without the key", s, err)
	}
	if _, err := server.New(nil, nil); err == nil {
		t.Error("server.New without a manager: no error")
	}
	if s, err := server.New(m, &server.Options{APIKeys: []string{keyAlice}, OperatorKeys: []string{"sk-op"}}); err != nil || s == nil {
		t.Errorf("server.New with distinct keys: %v, %v", s, err)
	}
}

// TestLeaseShown checks that GET /api/v2/sessions/{id} says until when a
// replica holds a running session (in the Hrns-Lease header: the body is
// the reference's Session), without naming the replica (its ID names its
// host, which is the operator's), and nothing once it waits.
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
	// The replica's ID names its host: operator information, which a
	// tenant's header leaves out.
	if !strings.HasPrefix(lease, `until="`) || strings.Contains(lease, "replica") {
		t.Errorf("lease of a running session = %q, want its end alone", lease)
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

// countFailStore fails EventCount with an error that names the database's
// host and user, as a driver's connection error does.
type countFailStore struct{ store.Store }

func (countFailStore) EventCount(context.Context, string) (string, int64, error) {
	return "", 0, errors.New(`failed to connect to host=db-primary.internal user=hrns database=hrns: dial error`)
}

// TestStreamErrorHidesTheStore: an event stream whose read fails tells
// the tenant that it failed, not the store's error, which names the
// operator's database host (it goes to the log).
func TestStreamErrorHidesTheStore(t *testing.T) {
	e := newEnv(t, &envOptions{wrap: func(st store.Store) store.Store { return countFailStore{st} }},
		calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)))
	id := e.create(keyAlice, orderAgent)
	r := e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil, "Accept", "text/event-stream")
	if !strings.Contains(string(r.body), "event: error") || strings.Contains(string(r.body), "db-primary") || !strings.Contains(string(r.body), "internal error") {
		t.Errorf("the stream after a failed read: %d %s; want an error event saying internal error, without the store's error", r.status, r.body)
	}
}
