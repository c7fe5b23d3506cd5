//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/sandbox"
)

// TestProxy: a command given the network through a [sandbox.Proxy]
// reaches nothing directly (not the host's loopback, where a database
// may listen), and through the proxy (plain HTTP, a CONNECT tunnel,
// SOCKS5 with names resolved by the proxy) only what Dial lets it: a
// refusal is a 403 or SOCKS5's "not allowed", and the destination sees no
// connection.
func TestProxy(t *testing.T) {
	needIsolation(t)
	var requests, conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.WriteString(w, "SECRET")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var (
		mu      sync.Mutex
		dialled []string
	)
	dial := func(allow bool) *sandbox.Proxy {
		return &sandbox.Proxy{Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, address)
			mu.Unlock()
			if !allow {
				return nil, fmt.Errorf("%w: %s is not allowed", sandbox.ErrDestinationRefused, address)
			}
			host, p, _ := net.SplitHostPort(address)
			if host == "localhost" {
				host = "127.0.0.1"
			}
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(host, p))
		}}
	}
	script := fmt.Sprintf(`P=%s
echo PROXY=$HTTP_PROXY $https_proxy $ALL_PROXY NO=$NO_PROXY
bash -c "exec 3<>/dev/tcp/127.0.0.1/$P" 2>/dev/null && echo DIRECT=yes || echo DIRECT=no
C="curl -s --noproxy '' --max-time 20 -o /dev/null"
echo PLAIN=$($C -w '%%{http_code}' http://127.0.0.1:$P/)
echo TUNNEL=$($C -p -w '%%{http_code}/%%{http_connect}' http://127.0.0.1:$P/)
echo SOCKS=$($C --proxy "$ALL_PROXY" -w '%%{http_code}' http://localhost:$P/)
echo BODY=$(curl -s --noproxy '' --max-time 20 http://127.0.0.1:$P/)`, port)
	for _, tc := range []struct {
		name    string
		allow   bool
		want    []string
		dialled int
	}{
		{"refused", false, []string{"DIRECT=no", "PLAIN=403", "TUNNEL=000/403", "SOCKS=000", "BODY=hrns proxy: sandbox: destination refused"}, 4},
		// The plain requests may share a connection.
		{"allowed", true, []string{"DIRECT=no", "PLAIN=200", "TUNNEL=200/200", "SOCKS=200", "BODY=SECRET"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			dialled = nil
			mu.Unlock()
			before := conns.Load()
			res, err := sandbox.Run(t.Context(), &sandbox.Spec{Shell: script, Dir: t.TempDir(), Proxy: dial(tc.allow)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Confinement.Network != "namespace+proxy" {
				t.Errorf("network: %q, want namespace+proxy (%s)", res.Confinement.Network, res.Confinement.Summary())
			}
			if !strings.Contains(res.Output, "PROXY=http://127.0.0.1:") || !strings.Contains(res.Output, "socks5h://127.0.0.1:") || !strings.Contains(res.Output, "NO=localhost,127.0.0.1,::1") {
				t.Errorf("the proxy variables are not set:\n%s", res.Output)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Output, w) {
					t.Errorf("want %s in:\n%s", w, res.Output)
				}
			}
			got := conns.Load() - before
			if !tc.allow && got != 0 || tc.allow && got < 3 {
				t.Errorf("the server had %d connections", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(dialled) < tc.dialled || len(dialled) > 4 {
				t.Errorf("dialled %q, want %d", dialled, tc.dialled)
			}
		})
	}
}

// TestProxyNeedsNamespace: without a network namespace a command given a
// proxy has no network at all (Landlock denies TCP), and says so; a spec
// with both AllowNetwork and Proxy is refused.
func TestProxyNeedsNamespace(t *testing.T) {
	needLandlock(t, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	sandbox.SetNoNetns(true)
	defer sandbox.SetNoNetns(false)
	p := &sandbox.Proxy{Dial: (&net.Dialer{}).DialContext}
	res, err := sandbox.Run(t.Context(), &sandbox.Spec{Shell: "bash -c \"exec 3<>/dev/tcp/127.0.0.1/" + port + "\" 2>/dev/null && echo DIRECT=yes || echo DIRECT=no; echo P=$HTTP_PROXY", Dir: t.TempDir(), Proxy: p})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "DIRECT=no") || !strings.Contains(res.Output, "P=\n") || accepted.Load() != 0 {
		t.Errorf("without a namespace: %d connections, output:\n%s", accepted.Load(), res.Output)
	}
	if !strings.Contains(res.Confinement.Summary(), "no network namespace for the proxy") {
		t.Errorf("the confinement does not say the proxy was not there: %s", res.Confinement.Summary())
	}
	if _, err := sandbox.Run(t.Context(), &sandbox.Spec{Shell: "true", Dir: t.TempDir(), Proxy: p, AllowNetwork: true}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("AllowNetwork and Proxy: %v", err)
	}
}
