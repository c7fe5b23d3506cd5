package cli

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/responses"
)

// TestProviderConnectionsKept: sixteen model requests at once, twice, to
// one provider open sixteen connections, not thirty (net/http's default
// transport keeps two idle per host and dials the rest again).
func TestProviderConnectionsKept(t *testing.T) {
	const n = 16
	var conns atomic.Int64
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait() // all n are in flight at once
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	hc := providerHTTP()
	for round := range 2 {
		arrived.Add(n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := hc.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
		if got := conns.Load(); got != n {
			t.Fatalf("after round %d of %d requests at once: %d connections, want %d", round+1, n, got, n)
		}
	}
}

// TestModelsUseProviderHTTP: every provider buildModel makes sends its
// requests through providerHTTP.
func TestModelsUseProviderHTTP(t *testing.T) {
	for _, kind := range []string{"openai", "openai-responses", "anthropic", "gemini"} {
		m, _, err := buildModel(&runOptions{provider: kind, model: "m", baseURL: "http://127.0.0.1:1/v1"}, &Config{}, &agentFile{}, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		var hc *http.Client
		switch m := m.(type) {
		case *openai.Client:
			hc = m.HTTPClient
		case *responses.Client:
			hc = m.HTTPClient
		case *anthropic.Client:
			hc = m.HTTPClient
		case *gemini.Client:
			hc = m.HTTPClient
		default:
			t.Fatalf("%s: a %T", kind, m)
		}
		if hc != providerHTTP() {
			t.Errorf("%s: the client sends through %p, not providerHTTP", kind, hc)
		}
	}
}

// TestProviderHTTPBuffers: hrns run's and hrns serve's provider client
// writes a request body up to 64 KiB at once, as the providers' own
// default client does (internal/httpapi), not the headers and then the
// body in 32 KiB pieces.
func TestProviderHTTPBuffers(t *testing.T) {
	tr := providerHTTP().Transport.(*http.Transport)
	if tr.WriteBufferSize != httpapi.BufferSize || tr.ReadBufferSize != httpapi.BufferSize {
		t.Errorf("buffers: write %d, read %d; want %d", tr.WriteBufferSize, tr.ReadBufferSize, httpapi.BufferSize)
	}
	if tr.Proxy == nil {
		t.Error("the proxies of the environment are not honoured")
	}
}
