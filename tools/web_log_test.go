package tools_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/internal/netpolicy/netpolicytest"
	"github.com/hrns-dev/hrns/tools"
)

// logBuffer is a slog text log in memory that also records the context
// value ctxKey{} of each record, as a handler adding the session would.
type logBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen []any
}

type ctxKey struct{}

func (b *logBuffer) Enabled(context.Context, slog.Level) bool { return true }
func (b *logBuffer) Handle(ctx context.Context, r slog.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, ctx.Value(ctxKey{}))
	return slog.NewTextHandler(&b.buf, nil).Handle(ctx, r)
}
func (b *logBuffer) WithAttrs([]slog.Attr) slog.Handler { return b }
func (b *logBuffer) WithGroup(string) slog.Handler      { return b }

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWebFetchLogsRefusals: the model reads the address policy's refusal
// without the address a name resolved to; the operator's log has the
// whole of it, the address included, written with the call's context
// (where hrns serve finds the session).
func TestWebFetchLogsRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	logs := &logBuffer{}
	ts := tools.Web(&tools.WebOptions{Logger: slog.New(logs)})
	ctx := context.WithValue(t.Context(), ctxKey{}, "session-1")
	r := callTool(t, ctx, ts, "web_fetch", map[string]any{"url": fmt.Sprintf("http://localhost:%d/page?token=QUERYSECRET", port)})
	if r.err == nil || !strings.Contains(r.err.Error(), "not on the public internet") || strings.Contains(r.err.Error(), "127.0.0.1") || strings.Contains(r.err.Error(), "::1") {
		t.Errorf("the model reads %v; want the refusal without the address", r)
	}
	log := logs.String()
	if !strings.Contains(log, "the address policy refused") || !strings.Contains(log, "tool=web_fetch") ||
		!(strings.Contains(log, "connection to 127.0.0.1 refused") || strings.Contains(log, "connection to ::1 refused")) {
		t.Errorf("the log does not say what was refused, with the address:\n%s", log)
	}
	if strings.Contains(log, "QUERYSECRET") {
		t.Errorf("the log shows the URL's query values:\n%s", log)
	}
	if len(logs.seen) == 0 || logs.seen[0] != "session-1" {
		t.Errorf("the refusal was not logged with the call's context: %v", logs.seen)
	}
}

// TestWebFetchTLSCertificateNames: a server whose certificate is valid for
// other names fails the fetch with fixed words, not the x509 error, which
// lists the names the certificate holds (the deployment's hosts, for an
// address the operator allowed); the log has the x509 error. The test CA
// is among the system's roots (a child process), as a deployment's own
// CA is.
func TestWebFetchTLSCertificateNames(t *testing.T) {
	if !netpolicytest.RunTrusted(t) {
		return
	}
	srv := netpolicytest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal") }))
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	logs := &logBuffer{}
	ts := tools.WebExempt(&tools.WebOptions{Logger: slog.New(logs)}, func(ap netip.AddrPort) bool {
		return ap.Addr().IsLoopback() && ap.Port() == port
	})
	for _, u := range []string{fmt.Sprintf("https://localhost:%d/", port), srv.URL} {
		r := fetch(t, ts, u)
		if r.err == nil || !strings.Contains(r.err.Error(), "the server's certificate was not valid for this name") {
			t.Errorf("%s: the model reads %v; want the certificate's failure in fixed words", u, r)
		}
		for _, secret := range netpolicytest.Secrets {
			if strings.Contains(r.String(), secret) {
				t.Errorf("%s: the model reads %q: %v", u, secret, r)
			}
		}
	}
	if log := logs.String(); !strings.Contains(log, netpolicytest.SecretName) || !strings.Contains(log, netpolicytest.SecretIP) {
		t.Errorf("the log lost the x509 error:\n%s", log)
	}
}
