package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// A webhook whose name resolves to an address off the public internet
// is refused without the address: a tenant must not learn what the
// deployment's names resolve to by pinging them (a DNS oracle). The
// server's log has the address.
func TestWebhookPingRefusalHidesTheResolvedAddress(t *testing.T) {
	model := openaitest.NewServer()
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
	logs := &syncBuffer{}
	hooks := webhook.New(st, &webhook.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}) // the default policy: public addresses only
	hooks.Start()
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice}, Webhooks: hooks})))
	t.Cleanup(func() {
		srv.Close()
		hooks.Stop(context.Background())
		m.Stop(context.Background())
	})
	e := &env{t: t, url: srv.URL, st: st, m: m}

	// localhost is a name, accepted when created and judged on the
	// address dialled.
	var created client.WebhookWithSecret
	e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, map[string]any{
		"url": "http://localhost:9/hooks", "enabled_events": []string{"session.completed"},
	}), http.StatusCreated).json(&created)
	r := e.expect(e.do("POST", "/api/v2/webhooks/"+created.ID+"/ping", keyAlice, nil), http.StatusBadGateway)
	body := string(r.body)
	for _, leak := range []string{"127.0.0.1", "::1", "loopback address;"} {
		if strings.Contains(body, leak) {
			t.Errorf("the refusal shows %q: %s", leak, body)
		}
	}
	if !strings.Contains(body, "not on the public internet") {
		t.Errorf("the refusal does not say why: %s", body)
	}
	if l := string(logs.Bytes()); !strings.Contains(l, "127.0.0.1") && !strings.Contains(l, "::1") {
		t.Errorf("the log lost the refused address:\n%s", l)
	}
}
