package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// replicaLeaseTTL is the replicas' lease TTL: short, so that a dead
// replica's sessions are taken over soon, yet long enough for a loaded
// machine to renew leases in time (a late renewal costs a takeover, not
// correctness).
const replicaLeaseTTL = "2s"

// cluster is several hrns serve processes on loopback sharing one
// PostgreSQL schema, behind a round-robin load balancer.
type cluster struct {
	t        testing.TB
	replicas []*replica
	lb       *balancer
	lbURL    string
	key      string
	// opKey is the replicas' operator key, which reads
	// GET /api/v2/replicas (key, a tenant's, does not).
	opKey string
}

type replica struct {
	url  string
	cmd  *exec.Cmd
	logs syncBuffer
	dead bool
}

// startCluster builds hrns and starts n replicas of hrns serve on the
// schema of dsn with model as their model; each runs at most workers
// sessions at once.
func startCluster(t testing.TB, n, workers int, dsn string, model *openaitest.Server) *cluster {
	t.Helper()
	return startClusterEnv(t, n, workers, dsn, model, nil)
}

// startClusterEnv starts a cluster as startCluster does, with env added
// to the replicas' environment.
func startClusterEnv(t testing.TB, n, workers int, dsn string, model *openaitest.Server, env []string) *cluster {
	t.Helper()
	bin := hrnsBinary(t)
	c := &cluster{t: t, key: "sk-replicas", opKey: "sk-replicas-operator"}
	home := t.TempDir()
	for range n {
		addr := freeAddr(t)
		r := &replica{url: "http://" + addr}
		r.cmd = exec.Command(bin, "serve", "--addr", addr, "--db", dsn, "--model", "test-model", "--workers", fmt.Sprint(workers))
		r.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home,
			"OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=test", "HRNS_LEASE_TTL=" + replicaLeaseTTL, "HRNS_API_KEYS=" + c.key, "HRNS_OPERATOR_KEYS=" + c.opKey}
		r.cmd.Env = append(r.cmd.Env, env...)
		r.cmd.Stdout, r.cmd.Stderr = &r.logs, &r.logs
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c.replicas = append(c.replicas, r)
	}
	t.Cleanup(func() {
		for i, r := range c.replicas {
			if r.dead {
				continue
			}
			r.cmd.Process.Signal(syscall.SIGTERM)
			if err := r.cmd.Wait(); err != nil {
				t.Errorf("replica %d after SIGTERM: %v", i, err)
			}
		}
		if t.Failed() {
			for i, r := range c.replicas {
				t.Logf("replica %d logs:\n%s", i, r.logs.String())
			}
		}
	})
	for i, r := range c.replicas {
		c.waitHealthy(i, r)
	}
	var urls []string
	for _, r := range c.replicas {
		urls = append(urls, r.url)
	}
	c.lb = &balancer{backends: urls, served: map[string]int{}, transport: &http.Transport{}}
	srv := httptest.NewServer(c.lb)
	t.Cleanup(srv.Close)
	c.lbURL = srv.URL
	return c
}

func (c *cluster) waitHealthy(i int, r *replica) {
	c.t.Helper()
	if !waitHealthy(strings.TrimPrefix(r.url, "http://")) {
		c.t.Fatalf("replica %d did not start:\n%s", i, r.logs.String())
	}
}

// client returns an SDK client of the load balancer (i < 0) or of
// replica i.
func (c *cluster) client(i int) *client.Client {
	url := c.lbURL
	if i >= 0 {
		url = c.replicas[i].url
	}
	return client.New(url, c.key, &client.Options{RetryDelay: 50 * time.Millisecond, MaxAttempts: 40, PollWait: 5 * time.Second})
}

// list returns the replicas as GET /api/v2/replicas shows them to the
// operator key.
func (c *cluster) list(ctx context.Context) []session.Replica {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.lbURL+"/api/v2/replicas", nil)
	req.Header.Set("Authorization", "Bearer "+c.opKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Items []session.Replica }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET /api/v2/replicas: %d, %v", resp.StatusCode, err)
	}
	return body.Items
}

// balancer sends each request to the next replica in turn, and to the one
// after when a replica does not accept connections (it is down), as a
// load balancer with health checks would.
type balancer struct {
	backends  []string
	transport http.RoundTripper

	mu     sync.Mutex
	next   int
	served map[string]int // requests answered, by backend
}

// counts returns how many requests each backend answered.
func (b *balancer) counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.served)
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	start := b.next
	b.next++
	b.mu.Unlock()
	for i := range b.backends {
		backend := b.backends[(start+i)%len(b.backends)]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, backend+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := b.transport.RoundTrip(req)
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			continue // down: try the next replica
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		b.mu.Lock()
		b.served[backend]++
		b.mu.Unlock()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, "no replica is up", http.StatusServiceUnavailable)
}

// replicaModel answers the tasks of the replica tests, whatever replica
// asks and whatever it asked before (a replica that takes a session over
// asks again): "Check order N." calls get_order_status once then answers
// with its result; "Check orders A, B and C at once." calls it three
// times in one step, then answers with the three results. Each request
// takes a while, so that runs are in flight when a replica is killed.
func replicaModel(body []byte) openaitest.Reply {
	time.Sleep(100 * time.Millisecond)
	results := statusRE.FindAll(body, -1)
	answered := bytes.Contains(body, []byte(`"role":"tool"`))
	if m := threeOrdersRE.FindSubmatch(body); m != nil {
		if answered {
			return openaitest.Reply{Text: fmt.Sprintf("orders: %s", bytes.Join(results, []byte(", ")))}
		}
		var calls []llm.ToolCall
		for _, id := range m[1:] {
			calls = append(calls, openaitest.ToolCall("call_"+string(id), "get_order_status", fmt.Sprintf(`{"order_id":%q}`, id)))
		}
		return openaitest.Reply{ToolCalls: calls}
	}
	m := oneOrderRE.FindSubmatch(body)
	if m == nil {
		return openaitest.Reply{Text: "no order"}
	}
	if answered && len(results) > 0 {
		return openaitest.Reply{Text: fmt.Sprintf("order %s: %s", m[1], results[0])}
	}
	return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_"+string(m[1]), "get_order_status", fmt.Sprintf(`{"order_id":%q}`, m[1]))}}
}

var (
	oneOrderRE    = regexp.MustCompile(`Check order (\d+)\.`)
	threeOrdersRE = regexp.MustCompile(`Check orders (\d+), (\d+) and (\d+) at once\.`)
	statusRE      = regexp.MustCompile(`status-\d+`)
)

var orderTool = loop.NewTool("get_order_status", "Look up the status of an order.", func(_ context.Context, in struct {
	OrderID string `json:"order_id"`
}) (string, error) {
	return "status-" + in.OrderID, nil
})

func inlineAgent(task string) *client.SessionRequest {
	return &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "support-agent"}}, Messages: client.Text(task)}
}

// eventKinds names events "Type/kind/state", as the crash test does.
func eventKinds(events []session.Event) []string {
	var out []string
	for _, e := range events {
		k := e.Type
		var d struct{ Kind, State string }
		json.Unmarshal(e.Data, &d)
		for _, s := range []string{d.Kind, d.State} {
			if s != "" {
				k += "/" + s
			}
		}
		out = append(out, k)
	}
	return out
}

// history reads a session's whole log.
func history(t *testing.T, ctx context.Context, h *client.Handle) []session.Event {
	t.Helper()
	var events []session.Event
	for e, err := range h.Stream(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	for i, e := range events {
		if e.Index != int64(i) {
			t.Errorf("event %d has index %d", i, e.Index)
		}
	}
	return events
}

// waitStatus long-polls the session until it has the status, and returns
// the number of events it has then.
func waitStatus(t *testing.T, ctx context.Context, h *client.Handle, want session.Status) int64 {
	t.Helper()
	var cursor int64
	for range 200 {
		c, err := h.Changes(ctx, &client.ChangesOptions{FromIndex: cursor, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			continue
		}
		cursor += int64(len(c.NewEvents))
		if c.Status == want {
			return cursor
		}
		if c.Status.Terminal() {
			t.Fatalf("session ended %s, want %s", c.Status, want)
		}
	}
	t.Fatalf("session never reached %s", want)
	return 0
}

// TestServeReplicas runs three hrns serve processes on one PostgreSQL
// schema: any replica answers any request, a long-poll held by one is
// woken by a post to another, results posted at once through different
// replicas are each recorded once, and when one replica is killed with
// SIGKILL mid-run the others take its sessions over after their leases
// expire: every session completes, with no event lost or duplicated and
// the cursors clients held still valid.
func TestServeReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three hrns serve processes")
	}
	dsn := postgrestest.DSN(t)
	model := openaitest.NewServer()
	defer model.Close()
	for range 1000 {
		model.Push(openaitest.Reply{Func: replicaModel})
	}
	c := startCluster(t, 3, 2, dsn, model)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	t.Run("ReplicasForTheOperatorOnly", func(t *testing.T) {
		// Every replica shows the three, hosts and PIDs included, to
		// the operator key, and answers the tenant's key as a route
		// that does not exist.
		for i, r := range c.replicas {
			s := &servingCmd{url: r.url}
			_, missing := s.get(t, "GET", "/api/v2/no-such-route", c.key)
			if status, body := s.get(t, "GET", "/api/v2/replicas", c.key); status != http.StatusNotFound || body != missing {
				t.Errorf("replica %d: GET /api/v2/replicas with the tenant's key: %d %s; want %s", i, status, body, missing)
			}
			// Every replica records itself at its first heartbeat,
			// which may follow its first health check.
			var status int
			var body string
			pids := map[int]bool{}
			for range 1000 {
				status, body = s.get(t, "GET", "/api/v2/replicas", c.opKey)
				var list struct{ Items []session.Replica }
				json.Unmarshal([]byte(body), &list)
				clear(pids)
				for _, r := range list.Items {
					if r.Host != "" && r.Healthy {
						pids[r.PID] = true
					}
				}
				if status != http.StatusOK || len(pids) == len(c.replicas) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if status != http.StatusOK || len(pids) != len(c.replicas) || !pids[r.cmd.Process.Pid] {
				t.Errorf("replica %d: GET /api/v2/replicas with the operator key: %d %s; want the %d replicas", i, status, body, len(c.replicas))
			}
		}
	})

	t.Run("LongPollWokenByAnotherReplica", func(t *testing.T) {
		// A paused session runs nowhere: the only write is the post.
		h, err := c.client(0).StartSession(ctx, inlineAgent("Check order 21."), orderTool)
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, ctx, h, session.StatusAwaitingToolResults)
		if err := c.client(1).Session(h.ID()).Pause(ctx); err != nil {
			t.Fatal(err)
		}
		cursor := waitStatus(t, ctx, c.client(1).Session(h.ID()), session.StatusPaused)
		polled := make(chan *client.Changes, 1)
		go func() {
			ch, err := c.client(0).Session(h.ID()).Changes(ctx, &client.ChangesOptions{FromIndex: cursor, Wait: 25 * time.Second})
			if err != nil {
				t.Error(err)
			}
			polled <- ch
		}()
		time.Sleep(200 * time.Millisecond) // let the long-poll wait; it works either way
		if err := c.client(2).Session(h.ID()).SendMessage(ctx, "Also check order 22."); err != nil {
			t.Fatal(err)
		}
		got := <-polled
		if got == nil {
			t.Fatal("the long-poll on replica 0 timed out: a message posted to replica 2 did not wake it")
		}
		if kinds := eventKinds(got.NewEvents); len(kinds) == 0 || kinds[0] != "AgentEvent/message_event" {
			t.Errorf("the long-poll returned %v, want the message first", kinds)
		}
		if err := c.client(2).Session(h.ID()).Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ConcurrentToolResults", func(t *testing.T) {
		h, err := c.client(-1).StartSession(ctx, inlineAgent("Check orders 11, 12 and 13 at once."), orderTool)
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, ctx, h, session.StatusAwaitingToolResults)
		// Each of the three results is posted through each replica, all
		// nine posts at once.
		var wg sync.WaitGroup
		for _, order := range []string{"11", "12", "13"} {
			res := client.ToolResult{Kind: session.KindToolResult, ToolReq: client.ToolRequest{ToolName: "get_order_status", ID: "call_" + order}, Result: json.RawMessage(`"status-` + order + `"`)}
			for i := range c.replicas {
				wg.Go(func() {
					err := c.client(i).Session(h.ID()).PostToolResults(ctx, res)
					if err != nil && !errors.Is(err, client.ErrConflict) {
						t.Errorf("posting %s through replica %d: %v", order, i, err)
					}
				})
			}
		}
		wg.Wait()
		res, err := h.WaitForCompletion(ctx, orderTool)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != session.StatusCompleted || res.Answer != "orders: status-11, status-12, status-13" {
			t.Errorf("ended %s with %q", res.Status, res.Answer)
		}
		events := history(t, ctx, h)
		want := []string{
			"AgentEvent/message_event", "AgentStartedEvent", "ActiveStateChangeEvent/running",
			"AgentEvent/policy_event", "MetricsUpdateEvent", "ActiveStateChangeEvent/awaiting_tool_results",
			"AgentEvent/tool_result", "ActiveStateChangeEvent/awaiting_tool_results",
			"AgentEvent/tool_result", "ActiveStateChangeEvent/awaiting_tool_results",
			"AgentEvent/tool_result", "ActiveStateChangeEvent/running",
			"AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/answer_event", "AgentCompletionEvent",
		}
		if diff := cmp.Diff(want, eventKinds(events)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		var ids []string
		for _, e := range events {
			var d session.AgentEventData
			if json.Unmarshal(e.Data, &d) == nil && d.Kind == session.KindToolResult {
				ids = append(ids, d.ToolReq.ID)
			}
		}
		slices.Sort(ids)
		if diff := cmp.Diff([]string{"call_11", "call_12", "call_13"}, ids); diff != "" {
			t.Errorf("tool results recorded (-want +got):\n%s", diff)
		}
	})

	t.Run("KillOneReplica", func(t *testing.T) {
		const n = 8
		lbClient := c.client(-1)
		outcomes := make([]followedRun, n) // each read across the kill
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				outcomes[i] = runFollowed(ctx, lbClient, inlineAgent(fmt.Sprintf("Check order %d.", 4240+i)), orderTool)
			})
		}
		// Once the runs are under way, kill the replica that holds the
		// most sessions.
		before := len(model.Requests())
		holders := map[string]bool{}
		var victim session.Replica
		for range 2000 {
			for _, r := range c.list(ctx) {
				if r.Leases > 0 {
					holders[r.ID] = true
				}
				if r.Leases > victim.Leases {
					victim = r
				}
			}
			if victim.Leases > 0 && len(model.Requests()) >= before+n {
				break
			}
			victim = session.Replica{}
			time.Sleep(5 * time.Millisecond)
		}
		if victim.Leases == 0 {
			t.Fatal("no replica ever held a session")
		}
		var killed *replica
		for _, r := range c.replicas {
			if r.cmd.Process.Pid == victim.PID {
				killed = r
			}
		}
		if killed == nil {
			t.Fatalf("no replica process has the pid %d of %s", victim.PID, victim.ID)
		}
		if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed.cmd.Wait()
		killed.dead = true
		t.Logf("killed %s (pid %d) holding %d sessions", victim.ID, victim.PID, victim.Leases)
		wg.Wait()

		want := []string{
			"AgentEvent/message_event", "AgentStartedEvent", "ActiveStateChangeEvent/running",
			"AgentEvent/policy_event", "MetricsUpdateEvent", "ActiveStateChangeEvent/awaiting_tool_results",
			"AgentEvent/tool_result", "ActiveStateChangeEvent/running",
			"AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/answer_event", "AgentCompletionEvent",
		}
		for i, o := range outcomes {
			if o.err != nil {
				t.Errorf("session %d: %v", i, o.err)
				continue
			}
			wantAnswer := fmt.Sprintf("order %d: status-%d", 4240+i, 4240+i)
			if o.res.Status != session.StatusCompleted || o.res.Answer != wantAnswer {
				t.Errorf("session %d ended %s with %q, want completed with %q", i, o.res.Status, o.res.Answer, wantAnswer)
			}
			events := history(t, ctx, lbClient.Session(o.res.SessionID))
			if diff := cmp.Diff(o.followed, events); diff != "" {
				t.Errorf("session %d: events read across the kill differ from the log (-followed +log):\n%s", i, diff)
			}
			if diff := cmp.Diff(want, eventKinds(events)); diff != "" {
				t.Errorf("session %d events (-want +got):\n%s", i, diff)
			}
		}

		// Operators see the dead replica as such, once its heartbeat
		// is older than its lease TTL, and the others as healthy.
		var health map[string]bool
		for range 1000 {
			health = map[string]bool{}
			for _, r := range c.list(ctx) {
				health[r.ID] = r.Healthy
			}
			if !health[victim.ID] {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		alive := 0
		for id, ok := range health {
			if ok && id != victim.ID {
				alive++
			}
		}
		if _, listed := health[victim.ID]; !listed || health[victim.ID] || alive != len(c.replicas)-1 {
			t.Errorf("replica health after the kill = %v; want %s listed unhealthy and %d others healthy", health, victim.ID, len(c.replicas)-1)
		}
		if len(holders) < 2 {
			t.Errorf("sessions ran on %d replica(s) before the kill, want them spread over at least 2", len(holders))
		}
	})
	served := c.lb.counts()
	t.Logf("requests answered by each replica: %v", served)
	if len(served) != len(c.replicas) {
		t.Errorf("requests reached %d replicas, want all %d: %v", len(served), len(c.replicas), served)
	}
}

// BenchmarkServeReplicas measures the throughput of 1, 2 and 3 replicas
// on one PostgreSQL schema behind the balancer, and of one on SQLite: sessions completed per
// second, each with one client-tool round trip (two model requests), 32
// at a time, the model answering at once. All processes share this
// machine's cores, the database's included: on one machine it measures
// what sharing the work costs, not what more machines add.
func BenchmarkServeReplicas(b *testing.B) {
	for _, n := range []int{0, 1, 2, 3} {
		name := fmt.Sprintf("postgres/replicas=%d", n)
		if n == 0 {
			name = "sqlite/replicas=1"
		}
		b.Run(name, func(b *testing.B) {
			var dsn string
			if n == 0 {
				n, dsn = 1, "sqlite:"+filepath.Join(b.TempDir(), "hrns.db")
			} else {
				dsn = postgrestest.DSN(b)
			}
			model := openaitest.NewServer()
			defer model.Close()
			step := func(body []byte) openaitest.Reply {
				m := oneOrderRE.FindSubmatch(body)
				if m == nil {
					return openaitest.Reply{Text: "no order"}
				}
				if res := statusRE.Find(body); res != nil && bytes.Contains(body, []byte(`"role":"tool"`)) {
					return openaitest.Reply{Text: fmt.Sprintf("order %s: %s", m[1], res)}
				}
				return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_"+string(m[1]), "get_order_status", fmt.Sprintf(`{"order_id":%q}`, m[1]))}}
			}
			for range 1 << 16 {
				model.Push(openaitest.Reply{Func: step})
			}
			c := startCluster(b, n, 64, dsn, model)
			cl := c.client(-1)
			ctx := b.Context()
			sem := make(chan struct{}, 32)
			var wg sync.WaitGroup
			i := 0
			start := time.Now()
			for b.Loop() {
				i++
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					res, err := cl.RunSession(ctx, inlineAgent(fmt.Sprintf("Check order %d.", i)), orderTool)
					if err != nil || res.Status != session.StatusCompleted {
						b.Errorf("session %d: %v, %+v", i, err, res)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sessions/s")
		})
	}
}
