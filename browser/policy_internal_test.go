package browser

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// TestProxyPins checks the second line of the policy on its own: a client
// of the proxy (as Chromium is, for requests the Fetch domain does not see)
// cannot reach a refused address, over plain HTTP or through CONNECT.
func TestProxyPins(t *testing.T) {
	var hit atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit.Store(true) }))
	defer srv.Close()
	p := &policy{}
	x, err := startProxy(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	pu, _ := url.Parse("http://" + x.addr())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}

	resp, err := client.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "loopback") {
		t.Fatalf("plain HTTP to loopback: %s %s", resp.Status, body)
	}
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit.Store(true) }))
	defer tls.Close()
	tc := tls.Client()
	tc.Transport.(*http.Transport).Proxy = http.ProxyURL(pu)
	if _, err := tc.Get(tls.URL); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("CONNECT to loopback: %v", err)
	}
	if hit.Load() {
		t.Fatal("a refused server was reached")
	}
	refused, _ := p.take()
	if len(refused) != 2 {
		t.Fatalf("refusals noted: %q", refused)
	}

	// A name is refused on the address it resolves to, which the model's
	// note does not show (it may work for an API key of hrns serve, who
	// must not learn what the deployment's names resolve to); the log does.
	logs := &bytes.Buffer{}
	p.log = slog.New(slog.NewTextHandler(logs, nil))
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	resp, err = client.Get("http://localhost:" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	refused, _ = p.take()
	if len(refused) != 1 || !strings.Contains(refused[0], "localhost:"+port) || !strings.Contains(refused[0], "not on the public internet") ||
		strings.Contains(refused[0], "127.0.0.1") || strings.Contains(refused[0], "::1") {
		t.Errorf("the refusal of a name noted for the model: %q", refused)
	}
	if !strings.Contains(logs.String(), "127.0.0.1") && !strings.Contains(logs.String(), "::1") {
		t.Errorf("the log lost the refused address: %s", logs)
	}
	if hit.Load() {
		t.Fatal("a refused server was reached")
	}

	// Through the allow-list, the same requests go through.
	x2, err := startProxy(&policy{allow: func(ap netip.AddrPort) bool { return ap.String() == srv.Listener.Addr().String() }})
	if err != nil {
		t.Fatal(err)
	}
	defer x2.close()
	pu2, _ := url.Parse("http://" + x2.addr())
	client2 := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu2)}}
	resp, err = client2.Get(srv.URL + "/x")
	if err != nil || resp.StatusCode != http.StatusOK || !hit.Load() {
		t.Fatalf("an allowed address: %v %v", err, resp)
	}
	resp.Body.Close()
}
