package cli

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestServeWebhooks: hrns serve delivers webhooks, signed, to where its
// operator lets them go: loopback with --webhook-allow-private, and not
// without.
func TestServeWebhooks(t *testing.T) {
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	env := map[string]string{"HRNS_API_KEYS": "sk-1", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": model.URL()}
	got := make(chan error, 4)
	var secret string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, err := client.VerifyWebhook(r.Header, body, nil, secret)
		got <- err
	}))
	t.Cleanup(receiver.Close)

	strict := startServe(t, env, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "a.db"))
	_, err := client.New(strict.url, "sk-1", nil).CreateWebhook(t.Context(), &client.CreateWebhookParams{URL: receiver.URL})
	if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a webhook to loopback without --webhook-allow-private: %v, want a refusal", err)
	}

	open := startServe(t, env, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "b.db"), "--webhook-allow-private")
	c := client.New(open.url, "sk-1", nil)
	hook, err := c.CreateWebhook(t.Context(), &client.CreateWebhookParams{URL: receiver.URL})
	if err != nil {
		t.Fatal(err)
	}
	secret = hook.Secret
	if status, err := c.PingWebhook(t.Context(), hook.ID); err != nil || status != http.StatusOK {
		t.Fatalf("ping = %d, %v", status, err)
	}
	if err := <-got; err != nil {
		t.Errorf("the ping does not verify: %v", err)
	}
	// Metadata addresses stay closed.
	if _, err := c.CreateWebhook(t.Context(), &client.CreateWebhookParams{URL: "http://169.254.169.254/"}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("a webhook to the metadata address: %v, want a refusal", err)
	}
}

func TestWebhookAllow(t *testing.T) {
	for _, tc := range []struct {
		o    webhookOptions
		addr string
		want bool
	}{
		{webhookOptions{}, "127.0.0.1:80", false},
		{webhookOptions{allow: "10.0.0.0/8"}, "10.1.2.3:443", true},
		{webhookOptions{allow: "10.0.0.0/8"}, "127.0.0.1:80", false},
		{webhookOptions{allowPrivate: true}, "127.0.0.1:80", true},
		{webhookOptions{allowPrivate: true}, "[fd00::1]:80", true},
		{webhookOptions{allowPrivate: true}, "169.254.169.254:80", false},
		{webhookOptions{allowPrivate: true}, "[fd00:ec2::254]:80", false},
		{webhookOptions{allowPrivate: true, allow: "169.254.169.254"}, "169.254.169.254:80", true},
	} {
		allow, err := tc.o.allowFunc()
		if err != nil {
			t.Fatal(err)
		}
		if got := allow != nil && allow(netip.MustParseAddrPort(tc.addr)); got != tc.want {
			t.Errorf("%+v: %s allowed = %v, want %v", tc.o, tc.addr, got, tc.want)
		}
	}
	if _, err := (&webhookOptions{allow: "nonsense"}).allowFunc(); err == nil {
		t.Error("a bad --webhook-allow was accepted")
	}
}
