package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// ExampleVerifyWebhook receives a webhook of hrns serve and checks its
// signature before trusting it. The server is the real one, in process;
// its operator lets webhooks reach loopback, where the receiver listens.
func ExampleVerifyWebhook() {
	dir, _ := os.MkdirTemp("", "hrns-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	defer st.Close()
	m := session.New(st, &openai.Client{BaseURL: "http://127.0.0.1:1", Model: "unused"}, nil)
	hooks := webhook.New(st, &webhook.Options{Allow: func(a netip.AddrPort) bool { return a.Addr().IsLoopback() }})
	h, _ := server.New(m, &server.Options{APIKeys: []string{"sk-example"}, Webhooks: hooks})
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The receiver: the secret comes from where it was kept at creation.
	var secret string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if _, err := client.VerifyWebhook(r.Header, body, nil, secret); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var event struct{ Type string }
		json.Unmarshal(body, &event)
		fmt.Println("verified", event.Type)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	c := client.New(srv.URL, "sk-example", nil)
	ctx := context.Background()
	hook, err := c.CreateWebhook(ctx, &client.CreateWebhookParams{URL: receiver.URL, EnabledEvents: []string{"session.completed"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	secret = hook.Secret
	status, err := c.PingWebhook(ctx, hook.ID)
	fmt.Println("the receiver answered", status, err)
	// Output:
	// verified webhook.ping
	// the receiver answered 204 <nil>
}
