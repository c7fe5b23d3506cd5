package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// newHookEnv is newEnv with the webhooks of the store served and
// delivered; webhooks may reach loopback, where the tests' receivers are.
func newHookEnv(t *testing.T, replies ...openaitest.Reply) (*env, *webhook.Service) {
	t.Helper()
	return newHookEnvWith(t, nil, replies...)
}

// newHookEnvWith is newHookEnv with the webhooks' options (Allow is set).
func newHookEnvWith(t *testing.T, o *webhook.Options, replies ...openaitest.Reply) (*env, *webhook.Service) {
	t.Helper()
	var opts webhook.Options
	if o != nil {
		opts = *o
	}
	opts.Allow = func(a netip.AddrPort) bool { return a.Addr().IsLoopback() }
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hooks := webhook.New(st, &opts)
	hooks.Start()
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Webhooks: hooks})))
	t.Cleanup(func() {
		srv.Close()
		hooks.Stop(context.Background())
		m.Stop(context.Background())
	})
	return &env{t: t, model: model, url: srv.URL, st: st}, hooks
}

// hookReceiver is a webhook endpoint on loopback that verifies what it
// receives with the secrets it is given, as a user's receiver does.
type hookReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	secrets []string
	got     chan hookRequest
}

type hookRequest struct {
	header   http.Header
	verified bool
	event    struct {
		ID   string                    `json:"id"`
		Type string                    `json:"type"`
		Data client.WebhookSessionData `json:"data"`
	}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{got: make(chan hookRequest, 16)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		secrets := rc.secrets
		rc.mu.Unlock()
		req := hookRequest{header: r.Header}
		id, err := client.VerifyWebhook(r.Header, body, nil, secrets...)
		req.verified = err == nil
		json.Unmarshal(body, &req.event)
		if req.verified && id != req.event.ID {
			t.Errorf("webhook-id %s, body id %s", id, req.event.ID)
		}
		rc.got <- req
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *hookReceiver) trust(secrets ...string) {
	rc.mu.Lock()
	rc.secrets = secrets
	rc.mu.Unlock()
}

// next returns the next request; the bound only keeps a broken test
// from hanging.
func (rc *hookReceiver) next(t *testing.T) hookRequest {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook request")
		return hookRequest{}
	}
}

func TestWebhooksAPI(t *testing.T) {
	e, hooks := newHookEnv(t, openaitest.Reply{Text: "done"})
	rc := newHookReceiver(t)

	r := e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, map[string]any{
		"url": rc.URL + "/hooks", "enabled_events": []string{"session.completed", "session.failed"}, "description": "orders",
	}), http.StatusCreated)
	var created client.WebhookWithSecret
	r.json(&created)
	if !strings.HasPrefix(created.Secret, "whsec_") || r.header.Get("Location") != "/api/v2/webhooks/"+created.ID ||
		created.Description == nil || *created.Description != "orders" || created.Disabled || created.LastDeliveryStatus != nil {
		t.Fatalf("created %s (Location %s)", r.body, r.header.Get("Location"))
	}
	rc.trust(created.Secret)
	base := "/api/v2/webhooks/" + created.ID

	// Reads never show the secret.
	for _, path := range []string{base, "/api/v2/webhooks", "/api/v2/webhooks?page=1&size=5&sort=created_at"} {
		r := e.expect(e.do("GET", path, keyAlice, nil), http.StatusOK)
		if strings.Contains(string(r.body), created.Secret) || strings.Contains(string(r.body), `"secret"`) {
			t.Errorf("GET %s shows the secret: %s", path, r.body)
		}
	}
	var page client.WebhookPage
	e.expect(e.do("GET", "/api/v2/webhooks", keyAlice, nil), http.StatusOK).json(&page)
	if page.Total != 1 || len(page.Items) != 1 || page.Items[0].ID != created.ID || page.Page != 1 {
		t.Errorf("list = %+v", page)
	}
	var types []client.WebhookEventType
	e.expect(e.do("GET", "/api/v2/webhooks/events", keyAlice, nil), http.StatusOK).json(&types)
	if len(types) < 5 || types[0].Type != "*" {
		t.Errorf("event types = %+v", types)
	}

	// A ping is signed and answered now.
	var ping struct {
		ResponseStatus int `json:"response_status"`
	}
	e.expect(e.do("POST", base+"/ping", keyAlice, nil), http.StatusOK).json(&ping)
	if got := rc.next(t); !got.verified || got.event.Type != webhook.PingType || ping.ResponseStatus != http.StatusNoContent {
		t.Errorf("ping: verified %v, type %s, response_status %d", got.verified, got.event.Type, ping.ResponseStatus)
	}

	// A session that completes is delivered, once committed.
	id := e.create(keyAlice, `{"agent":{"name":"x","environments":[]},"messages":"hi"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	got := rc.next(t)
	if !got.verified || got.event.Type != "session.completed" || got.event.Data.SessionID != id || got.event.Data.Status != "completed" ||
		got.header.Get("webhook-id") != got.event.ID {
		t.Errorf("delivery: verified %v, %+v", got.verified, got.event)
	}
	// The log shows it: GET .../deliveries (an hrns addition).
	// The worker records the attempt after the receiver answered; Stop
	// waits for that.
	if err := hooks.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	var log client.WebhookDeliveryPage
	e.expect(e.do("GET", base+"/deliveries?state=delivered", keyAlice, nil), http.StatusOK).json(&log)
	if len(log.Items) != 1 || log.Items[0].EventID != got.event.ID || len(log.Items[0].Attempts) != 1 ||
		*log.Items[0].Attempts[0].StatusCode != http.StatusNoContent || log.Items[0].Attempts[0].Error != nil {
		t.Errorf("delivery log = %+v", log)
	}
	var rec client.Webhook
	e.expect(e.do("GET", base, keyAlice, nil), http.StatusOK).json(&rec)
	if rec.LastDeliveryStatus == nil || *rec.LastDeliveryStatus != "succeeded" || rec.LastSuccessAt == nil {
		t.Errorf("record after a delivery: %+v", rec)
	}

	// Rotation: for the overlap, deliveries carry both signatures.
	var rotated client.WebhookWithSecret
	e.expect(e.do("POST", base+"/rotate", keyAlice, nil), http.StatusOK).json(&rotated)
	if rotated.Secret == created.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Fatalf("rotated secret %q", rotated.Secret)
	}
	for _, secret := range []string{rotated.Secret, created.Secret} {
		rc.trust(secret)
		e.expect(e.do("POST", base+"/ping", keyAlice, nil), http.StatusOK)
		if got := rc.next(t); !got.verified {
			t.Errorf("after the rotation, a ping does not verify with one of the secrets: %s", got.header.Get("webhook-signature"))
		}
	}

	// Changes: only the fields given.
	var upd client.Webhook
	e.expect(e.do("PATCH", base, keyAlice, `{"disabled":true,"enabled_events":["*"]}`), http.StatusOK).json(&upd)
	if !upd.Disabled || len(upd.EnabledEvents) != 1 || upd.EnabledEvents[0] != "*" || upd.URL != created.URL || *upd.Description != "orders" {
		t.Errorf("patched %+v", upd)
	}

	e.expect(e.do("DELETE", base, keyAlice, nil), http.StatusNoContent)
	e.expect(e.do("GET", base, keyAlice, nil), http.StatusNotFound)
}

func TestWebhooksScope(t *testing.T) {
	e, _ := newHookEnv(t)
	var created client.WebhookWithSecret
	e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, `{"url":"https://hooks.example.com/x"}`), http.StatusCreated).json(&created)
	if len(created.EnabledEvents) != 1 || created.EnabledEvents[0] != "*" {
		t.Errorf("default events %v, want [*]", created.EnabledEvents)
	}
	base := "/api/v2/webhooks/" + created.ID
	for _, req := range []struct{ method, path, body string }{
		{"GET", base, ""},
		{"PATCH", base, `{"disabled":true}`},
		{"POST", base + "/rotate", ""},
		{"POST", base + "/ping", ""},
		{"GET", base + "/deliveries", ""},
		{"DELETE", base, ""},
	} {
		var body any
		if req.body != "" {
			body = req.body
		}
		r := e.expect(e.do(req.method, req.path, keyBob, body), http.StatusNotFound)
		if strings.Contains(string(r.body), created.URL) {
			t.Errorf("%s %s as bob shows alice's webhook: %s", req.method, req.path, r.body)
		}
	}
	var page client.WebhookPage
	e.expect(e.do("GET", "/api/v2/webhooks", keyBob, nil), http.StatusOK).json(&page)
	if page.Total != 0 || len(page.Items) != 0 {
		t.Errorf("bob lists %+v", page)
	}
	// Alice's is untouched; an upper-case id names it too.
	var rec client.Webhook
	e.expect(e.do("GET", strings.ToUpper(base), keyAlice, nil), http.StatusNotFound) // the path prefix is case-sensitive
	e.expect(e.do("GET", "/api/v2/webhooks/"+strings.ToUpper(created.ID), keyAlice, nil), http.StatusOK).json(&rec)
	if rec.Disabled {
		t.Error("bob's PATCH changed alice's webhook")
	}
	e.expect(e.do("GET", base, "", nil), http.StatusUnauthorized)
}

func TestWebhooksValidation(t *testing.T) {
	e, _ := newHookEnv(t)
	for _, tc := range []struct {
		method, path, body string
		loc                string
	}{
		{"POST", "/api/v2/webhooks", `{}`, `["body","url"]`},
		{"POST", "/api/v2/webhooks", `{"url":"http://10.0.0.1/hook"}`, `["body","url"]`},
		{"POST", "/api/v2/webhooks", `{"url":"http://169.254.169.254/"}`, `["body","url"]`},
		{"POST", "/api/v2/webhooks", `{"url":"https://example.com/","enabled_events":["session.exploded"]}`, `["body","enabled_events",0]`},
		{"POST", "/api/v2/webhooks", `{"url":5}`, `["body","url"]`},
		{"POST", "/api/v2/webhooks", `not json`, `["body"]`},
		{"GET", "/api/v2/webhooks/not-a-uuid", ``, `["path","webhook_id"]`},
		{"GET", "/api/v2/webhooks?sort=url", ``, `["query","sort"]`},
		{"GET", "/api/v2/webhooks?size=1001", ``, `["query","size"]`},
		{"PATCH", "/api/v2/webhooks/6f1c2a0e-1b2c-4d3e-8f90-123456789abc", `{"url":"ftp://example.com/"}`, `["body","url"]`},
		{"GET", "/api/v2/webhooks/6f1c2a0e-1b2c-4d3e-8f90-123456789abc/deliveries?state=lost", ``, `["query","state"]`},
	} {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		r := e.expect(e.do(tc.method, tc.path, keyAlice, body), http.StatusUnprocessableEntity)
		var v struct {
			Detail []struct {
				Loc json.RawMessage `json:"loc"`
			} `json:"detail"`
		}
		r.json(&v)
		if len(v.Detail) == 0 || string(v.Detail[0].Loc) != tc.loc {
			t.Errorf("%s %s %s: %s, want loc %s", tc.method, tc.path, tc.body, r.body, tc.loc)
		}
	}
	// A missing webhook is 404, not 422.
	e.expect(e.do("GET", "/api/v2/webhooks/6f1c2a0e-1b2c-4d3e-8f90-123456789abc", keyAlice, nil), http.StatusNotFound)
	e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, `{"url":"https://example.com/"}`, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType)
}

// TestWebhooksDisabled: a server without webhooks says so.
func TestWebhooksDisabled(t *testing.T) {
	e := newEnv(t, nil)
	e.expect(e.do("GET", "/api/v2/webhooks", keyAlice, nil), http.StatusNotImplemented)
}

// TestWebhooksFairAcrossKeys: Alice's fifty webhooks at a receiver that
// never answers do not hold back Bob's delivery (issue 32, finding 7).
// Bob's delivery arrives while every attempt made for Alice is still in
// flight, and Alice never has more than PerKey of them at once.
func TestWebhooksFairAcrossKeys(t *testing.T) {
	const perKey = 3
	// The attempts at Alice's receiver last until the test ends: no
	// timeout frees their slots.
	e, _ := newHookEnvWith(t, &webhook.Options{Timeout: time.Hour, Concurrency: 8, PerKey: perKey})
	var started, ended atomic.Int32
	arrived := make(chan struct{}, 256)
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		ended.Add(1)
	}))
	t.Cleanup(func() {
		close(release)
		stuck.Close()
	})
	for i := range 50 {
		e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, map[string]any{"url": fmt.Sprintf("%s/%d", stuck.URL, i), "enabled_events": []string{"*"}}),
			http.StatusCreated)
	}
	rc := newHookReceiver(t)
	var bob client.WebhookWithSecret
	e.expect(e.do("POST", "/api/v2/webhooks", keyBob, map[string]any{"url": rc.URL, "enabled_events": []string{"*"}}), http.StatusCreated).json(&bob)
	rc.trust(bob.Secret)

	// A session of Alice's: a hundred deliveries (pending, then idle).
	e.create(keyAlice, `{"agent":{"name":"a","environments":[]}}`)
	for range perKey {
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("Alice's receiver got %d requests, want %d", started.Load(), perKey)
		}
	}
	id := e.create(keyBob, `{"agent":{"name":"b","environments":[]}}`)
	got := rc.next(t)
	if !got.verified || got.event.Data.SessionID != id {
		t.Errorf("Bob's delivery: verified %v, %+v", got.verified, got.event)
	}
	if n, done := started.Load(), ended.Load(); n != perKey || done != 0 {
		t.Errorf("when Bob's delivery arrived, Alice's receiver had %d requests (%d ended), want %d in flight", n, done, perKey)
	}
}
