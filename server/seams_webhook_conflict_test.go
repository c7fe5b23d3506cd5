package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// busyWebhooks is a store whose webhook updates always lose the race, as
// when other requests (or deliveries) keep changing the webhook.
type busyWebhooks struct {
	store.Store
	busy atomic.Bool
}

func (b *busyWebhooks) UpdateWebhook(ctx context.Context, w *store.Webhook) (*store.Webhook, error) {
	if b.busy.Load() {
		return nil, store.ErrConflict
	}
	return b.Store.UpdateWebhook(ctx, w)
}

// TestSeamsWebhookConflict: a change of a webhook that keeps losing the
// race to other writers is 409 (retry), as a vault's is, not a 500.
func TestSeamsWebhookConflict(t *testing.T) {
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
	busy := &busyWebhooks{Store: st}
	hooks := webhook.New(busy, &webhook.Options{Allow: func(a netip.AddrPort) bool { return a.Addr().IsLoopback() }})
	hooks.Start()
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Webhooks: hooks})))
	t.Cleanup(func() {
		srv.Close()
		hooks.Stop(context.Background())
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL, st: st}
	var created client.WebhookWithSecret
	e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, `{"url":"https://hooks.example.com/x"}`), http.StatusCreated).json(&created)
	busy.busy.Store(true)
	base := "/api/v2/webhooks/" + created.ID
	e.expect(e.do("PATCH", base, keyAlice, `{"disabled":true}`), http.StatusConflict)
	e.expect(e.do("POST", base+"/rotate", keyAlice, nil), http.StatusConflict)
	busy.busy.Store(false)
	e.expect(e.do("PATCH", base, keyAlice, `{"disabled":true}`), http.StatusOK)
}
