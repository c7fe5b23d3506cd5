package cli

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		// The metadata address inside IPv6 forms stays closed too.
		{webhookOptions{allowPrivate: true}, "[::ffff:169.254.169.254]:80", false},
		{webhookOptions{allowPrivate: true}, "[64:ff9b::a9fe:a9fe]:80", false},
		{webhookOptions{allowPrivate: true}, "[2002:a9fe:a9fe::1]:80", false},
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

// TestWebhookConfig checks that the config's [webhooks] fills what the
// flags leave unset, that flags win, that bad values are refused with the
// key named, and that a project's config may not set it.
func TestWebhookConfig(t *testing.T) {
	parse := func(t *testing.T, text string) *Config {
		t.Helper()
		cfg, err := parseConfig("config.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		name, config string
		flags        webhookOptions
		want         webhookOptions
		err          string
	}{
		{"defaults", "", webhookOptions{}, webhookOptions{timeout: defaultWebhookTimeout, maxAttempts: defaultWebhookMaxAttempts}, ""},
		{"config", "[webhooks]\nallow = [\"10.0.0.0/8\", \"192.168.1.5:443\"]\nallow_private = true\ntimeout = \"3s\"\nmax_attempts = 4\n", webhookOptions{},
			webhookOptions{allow: "10.0.0.0/8,192.168.1.5:443", allowPrivate: true, timeout: 3 * time.Second, maxAttempts: 4}, ""},
		{"flags win", "[webhooks]\nallow = [\"10.0.0.0/8\"]\ntimeout = \"3s\"\nmax_attempts = 4\n", webhookOptions{allow: "172.16.0.0/12", timeout: time.Second, maxAttempts: 2},
			webhookOptions{allow: "172.16.0.0/12", timeout: time.Second, maxAttempts: 2}, ""},
		{"bad timeout", "[webhooks]\ntimeout = \"soon\"\n", webhookOptions{}, webhookOptions{}, "[webhooks] timeout"},
		{"negative timeout", "[webhooks]\ntimeout = \"-1s\"\n", webhookOptions{}, webhookOptions{}, "[webhooks] timeout"},
		{"negative attempts", "[webhooks]\nmax_attempts = -1\n", webhookOptions{}, webhookOptions{}, "[webhooks] max_attempts"},
		{"negative flag", "", webhookOptions{maxAttempts: -3}, webhookOptions{}, "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.flags
			err := o.resolve(parse(t, tc.config))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o != tc.want {
				t.Errorf("resolved %+v, want %+v", o, tc.want)
			}
		})
	}

	// A repository's .hrns/config.toml may not open addresses to deliveries.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".hrns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".hrns", "config.toml"), []byte("[webhooks]\nallow_private = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, "")
	if err := cfg.mergeProject(dir); err == nil || !strings.Contains(err.Error(), `"webhooks"`) {
		t.Errorf("a project config setting [webhooks]: %v", err)
	}
	if cfg.Webhooks.AllowPrivate {
		t.Error("the project's allow_private reached the config")
	}
}
