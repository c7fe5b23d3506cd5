package browser

import (
	"io"
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
