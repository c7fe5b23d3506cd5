package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// newLoggedModelEnv is newEnv with the model of the caller's choice and the
// manager's log written to logs.
func newLoggedModelEnv(t *testing.T, model llm.Model, logs *syncBuffer) *env {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, model, &session.Options{
		Retry:  loop.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice}})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: t, url: srv.URL, st: st, m: m}
}

// closedAddr returns the host:port of a loopback listener that was
// closed: a connection to it is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// tenantViews runs a session to its failure and returns all a tenant
// reads of it: the session, its events as JSON and as an event stream.
func tenantViews(t *testing.T, e *env) string {
	t.Helper()
	id := e.create(keyAlice, `{"agent":{"name":"a"},"messages":"hi"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusFailed)
	var b strings.Builder
	b.WriteString(f.dump())
	b.Write(e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).body)
	b.Write(e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil), http.StatusOK).body)
	b.Write(e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil, "Accept", "text/event-stream"), http.StatusOK).body)
	return b.String()
}

// A session whose model server refuses connections fails saying that
// the model server could not be reached, without its address: the
// operator's endpoint is not the tenant's to see. The log has it.
func TestModelUnreachableHidesTheEndpointFromTheTenant(t *testing.T) {
	addr := closedAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	logs := &syncBuffer{}
	e := newLoggedModelEnv(t, &openai.Client{BaseURL: "http://" + addr + "/deployment-acme/v1", Model: "m"}, logs)
	views := tenantViews(t, e)
	for _, leak := range []string{addr, ":" + port, "127.0.0.1", "deployment-acme"} {
		if strings.Contains(views, leak) {
			t.Errorf("the tenant reads %q:\n%s", leak, views)
		}
	}
	for _, want := range []string{"the model server could not be reached (connection refused)", "retrying in"} {
		if !strings.Contains(views, want) {
			t.Errorf("the tenant does not read %q:\n%s", want, views)
		}
	}
	if !strings.Contains(string(logs.Bytes()), addr) {
		t.Errorf("the log lost the model server's address:\n%s", logs.Bytes())
	}
}

// A key in the query of a model's URL (Gemini's ?key=) shows nowhere:
// not in what the tenant reads, not in the server's log.
func TestModelURLKeyShowsNowhere(t *testing.T) {
	addr := closedAddr(t)
	logs := &syncBuffer{}
	e := newLoggedModelEnv(t, &gemini.Client{BaseURL: "http://" + addr + "/proxy?key=KEYSECRET", Model: "gemini-2.5-flash"}, logs)
	views := tenantViews(t, e)
	if strings.Contains(views, "KEYSECRET") || strings.Contains(views, addr) {
		t.Errorf("the tenant reads the key or the address:\n%s", views)
	}
	if !strings.Contains(views, "could not be reached") {
		t.Errorf("the tenant is not told the model server could not be reached:\n%s", views)
	}
	if strings.Contains(string(logs.Bytes()), "KEYSECRET") {
		t.Errorf("the log shows the key:\n%s", logs.Bytes())
	}
}

// A model endpoint that answers with an error keeps telling the tenant
// the provider's status and message; one that answers with a web page is
// named by neither its URL nor its address.
func TestModelErrorsTellTheTenantWhatHappened(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "html") {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><title>Sign in to the corporate proxy</title></html>")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"model 'm' does not exist","type":"invalid_request_error"}}`)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	e := newLoggedModelEnv(t, &openai.Client{BaseURL: srv.URL + "/v1", Model: "m"}, &syncBuffer{})
	views := tenantViews(t, e)
	if !strings.Contains(views, "HTTP 400") || !strings.Contains(views, "does not exist") || strings.Contains(views, host) {
		t.Errorf("the tenant should read the provider's status and message, not its address:\n%s", views)
	}

	e = newLoggedModelEnv(t, &openai.Client{BaseURL: srv.URL + "/html/v1", Model: "m"}, &syncBuffer{})
	views = tenantViews(t, e)
	if !strings.Contains(views, "HTML page") || !strings.Contains(views, "Sign in to the corporate proxy") || strings.Contains(views, host) {
		t.Errorf("the tenant should read that a web page answered, not where:\n%s", views)
	}
}

// A session whose environment cannot be set up on this server (here a
// directory that cannot be made: a real *fs.PathError) fails saying so,
// without the server's file paths, which are the operator's; the log
// has them.
func TestEnvironmentFailureHidesPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "profiles")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	m := session.New(st, &openai.Client{BaseURL: "http://" + closedAddr(t) + "/v1", Model: "m"}, &session.Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		SessionEnvironments: map[string]session.EnvironmentFunc{"web": func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
			if p.Session == "" {
				return &loop.Toolset{}, nil, nil // the request's check
			}
			if err := os.Mkdir(filepath.Join(file, p.Session), 0o700); err != nil {
				return nil, nil, fmt.Errorf("making the session's browser profile: %w", err)
			}
			return &loop.Toolset{}, nil, nil
		}},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice}})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, url: srv.URL, st: st, m: m}
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web"}]},"messages":"hi"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusFailed)
	views := f.dump() + string(e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).body) +
		string(e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil), http.StatusOK).body)
	if strings.Contains(views, dir) || !strings.Contains(views, "making the session's browser profile") || !strings.Contains(views, "not a directory") {
		t.Errorf("the tenant should read what failed, without the server's paths (%s):\n%s", dir, views)
	}
	if !strings.Contains(string(logs.Bytes()), file) {
		t.Errorf("the log lost the path:\n%s", string(logs.Bytes()))
	}
}
