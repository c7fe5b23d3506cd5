package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// hangProxy forwards TCP connections to a backend until hang is called:
// from then on it forwards nothing, in either direction, and holds every
// connection open, new ones too, as a database server that stopped
// answering does.
type hangProxy struct {
	ln      net.Listener
	backend string
	hung    chan struct{}
	hangs   sync.Once
	closed  chan struct{}
	mu      sync.Mutex
	conns   []net.Conn
}

func newHangProxy(t *testing.T, backend string) *hangProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{ln: ln, backend: backend, hung: make(chan struct{}), closed: make(chan struct{})}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *hangProxy) addr() string { return p.ln.Addr().String() }

// hang stops the forwarding.
func (p *hangProxy) hang() { p.hangs.Do(func() { close(p.hung) }) }

func (p *hangProxy) close() {
	close(p.closed)
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *hangProxy) keep(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *hangProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.keep(c)
		select {
		case <-p.hung:
			continue // held open, never answered
		default:
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.keep(b)
		go p.pipe(b, c)
		go p.pipe(c, b)
	}
}

// pipe copies from src to dst until the proxy hangs: then it holds both
// until the proxy is closed.
func (p *hangProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.hung:
			<-p.closed
			return
		default:
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestServeShutdownHungPostgres: hrns serve whose PostgreSQL stops
// answering (a proxy in between stops forwarding, connections held open)
// while a session runs, then gets SIGTERM, exits within its
// --shutdown-timeout (and a generous margin for a loaded machine: the
// bound is "does not hang", not a speed), saying what it abandoned.
func TestServeShutdownHungPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hrns and starts a server")
	}
	dsn := postgrestest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newHangProxy(t, u.Host)
	u.Host = proxy.addr()

	// The model answers the session's first request only when the test
	// ends: its worker is running when the store hangs.
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	model := openaitest.NewServer(openaitest.Reply{Func: func([]byte) openaitest.Reply {
		select {
		case asked <- struct{}{}:
		default: // a retry
		}
		<-release
		return openaitest.Reply{Text: "late"}
	}})
	defer model.Close()
	defer close(release)

	const grace = 2 * time.Second
	bin := hrnsBinary(t)
	addr := freeAddr(t)
	home := t.TempDir()
	cmd := exec.Command(bin, "serve", "--addr", addr, "--db", u.String(), "--model", "test-model", "--shutdown-timeout", grace.String())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=test", "HRNS_API_KEYS=sk-test"}
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	exited := make(chan struct{})
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("hrns serve:\n%s", logs.String())
		}
	}()
	if !waitHealthy(addr) {
		t.Fatal("hrns serve did not start")
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/v2/sessions", strings.NewReader(`{"agent":{"name":"a","environments":[]},"messages":"hello"}`))
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %s", resp.Status)
	}
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the session's worker did not ask the model")
	}

	proxy.hang()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	const margin = 20 * time.Second // a loaded machine; the old wait was 30 s and more
	select {
	case <-exited:
		var exit *exec.ExitError
		if exitErr != nil && !errors.As(exitErr, &exit) {
			t.Fatalf("hrns serve: %v", exitErr)
		}
	case <-time.After(grace + margin):
		t.Fatalf("hrns serve did not exit within %s of SIGTERM (--shutdown-timeout %s)", grace+margin, grace)
	}
	if out := logs.String(); !strings.Contains(out, "abandoned") {
		t.Errorf("no line says what the shutdown abandoned:\n%s", out)
	}
}

// hungStore is a store that stops answering once hang is called: from
// then on the calls below (a page of sessions, a session's commit, the
// schedules' and the webhooks' claims, its close) block, whatever their
// context, until the test ends. entered receives each call's name as it
// blocks.
type hungStore struct {
	store.Store
	hung, release chan struct{}
	hangs         sync.Once
	entered       chan string
}

func (h *hungStore) hang() { h.hangs.Do(func() { close(h.hung) }) }

func (h *hungStore) block(name string) {
	select {
	case <-h.hung:
	default:
		return
	}
	select {
	case h.entered <- name:
	default:
	}
	<-h.release
}

func (h *hungStore) ListSessions(ctx context.Context, p *store.ListParams) ([]*store.Session, int, error) {
	h.block("ListSessions")
	return h.Store.ListSessions(ctx, p)
}

func (h *hungStore) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	h.block("UpdateSession")
	return h.Store.UpdateSession(ctx, s, events, opts)
}

func (h *hungStore) ClaimScheduleRuns(ctx context.Context, p *store.ClaimParams) ([]*store.ScheduleRun, error) {
	h.block("ClaimScheduleRuns")
	return h.Store.ClaimScheduleRuns(ctx, p)
}

func (h *hungStore) ClaimDeliveries(ctx context.Context, p *store.ClaimParams) ([]*store.Delivery, error) {
	h.block("ClaimDeliveries")
	return h.Store.ClaimDeliveries(ctx, p)
}

func (h *hungStore) Close() error {
	h.block("Close")
	return h.Store.Close()
}

// TestServingStopHungStore: what hrns serve stops on SIGTERM (serving.stop)
// over a SQLite store that stops answering, with a request in progress,
// the schedules' worker in a claim and a session's worker running,
// returns once its deadline has passed (a generous bound: it must not
// wait for the store for ever) and names what it abandoned.
func TestServingStopHungStore(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := &hungStore{Store: db, hung: make(chan struct{}), release: make(chan struct{}), entered: make(chan string, 16)}
	defer db.Close()
	defer close(hs.release)

	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	model := openaitest.NewServer(openaitest.Reply{Func: func([]byte) openaitest.Reply {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
		return openaitest.Reply{Text: "late"}
	}})
	defer model.Close()
	defer close(release)

	log := slog.New(slog.DiscardHandler)
	m := session.New(hs, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{Logger: log})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The worker polls the store all the time: it is in a claim soon
	// after the store hangs.
	sch := schedule.New(m, hs, &schedule.Options{Owner: "test", MaxWait: time.Millisecond, Logger: log})
	schedCtx, stopSchedules := context.WithCancel(context.Background())
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		sch.Run(schedCtx)
	}()
	hooks := webhook.New(hs, &webhook.Options{ReplicaID: "test", Logger: log})
	hooks.Start()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base, cancelRequests := context.WithCancel(context.Background())
	srv := &http.Server{Handler: newServer(m, &server.Options{Schedules: sch, Webhooks: hooks, Logger: log}), BaseContext: func(net.Listener) context.Context { return base }}
	go srv.Serve(ln)
	sessions := "http://" + ln.Addr().String() + "/api/v2/sessions"

	resp, err := http.Post(sessions, "application/json", strings.NewReader(`{"agent":{"name":"a","environments":[]},"messages":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %s", resp.Status)
	}
	<-asked // the session's worker is running
	hs.hang()
	go func() {
		if resp, err := http.Get(sessions); err == nil {
			resp.Body.Close()
		}
	}()
	for want := map[string]bool{"ListSessions": true, "ClaimScheduleRuns": true}; len(want) > 0; {
		delete(want, <-hs.entered)
	}

	stopped := make(chan error, 1)
	go func() {
		stopped <- (&serving{srv: srv, cancelRequests: cancelRequests, stopSchedules: stopSchedules, schedDone: schedDone, m: m, hooks: hooks, st: hs}).stop(context.Background(), 200*time.Millisecond)
	}()
	var stopErr error
	select {
	case stopErr = <-stopped:
	case <-time.After(time.Minute): // "not for ever", not a speed
		t.Fatal("serving.stop did not return a minute after its deadline")
	}
	for _, what := range []string{"the shutdown deadline (--shutdown-timeout 200ms) passed", "the requests in progress", "the schedules' worker", "the store's close"} {
		if stopErr == nil || !strings.Contains(stopErr.Error(), what) {
			t.Errorf("stop: %v; want it to name %s", stopErr, what)
		}
	}
}
