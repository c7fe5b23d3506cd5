package mcp_test

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/mcp"
)

// syncLog is a slog text log in memory.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestMountHideTransportErrors: a server mounted under the address
// policy whose name then leads to a refused address (DNS rebinding: here
// the policy lets loopback through at mount and refuses it after, on a
// client that dials for every request). With HideTransportErrors the
// call's error says the destination was refused, without the address
// the name resolved to; the log has the transport's error.
func TestMountHideTransportErrors(t *testing.T) {
	var writes atomic.Int64
	srv := newHTTPServer(t, testTools(&writes))
	var allowed atomic.Bool
	allowed.Store(true)
	d := &net.Dialer{Control: netpolicy.Control(func(netip.AddrPort) bool { return allowed.Load() })}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	logs := &syncLog{}
	m := mount(t, &mcp.Spec{Name: "corp", URL: strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), HTTPClient: hc,
		HideTransportErrors: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if out, err := call(t, m.Toolset(), "corp__echo", `{"text":"x"}`); err != nil || out.IsError {
		t.Fatalf("a call before the name moved: %v %v", out, err)
	}
	allowed.Store(false)
	for i := range 3 { // the session may end, then the server is connected to again
		_, err := call(t, m.Toolset(), "corp__echo", `{"text":"x"}`)
		if err == nil {
			t.Fatalf("call %d: no error", i)
		}
		if msg := err.Error(); !strings.Contains(msg, `mcp server "corp"`) || !strings.Contains(msg, "not on the public internet") ||
			strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "::1") || strings.Contains(msg, "dial tcp") {
			t.Errorf("call %d: the model reads %q; want the refusal without the address", i, msg)
		}
	}
	if l := logs.String(); !strings.Contains(l, "127.0.0.1") && !strings.Contains(l, "::1") {
		t.Errorf("the log lost the transport's error:\n%s", l)
	}
}
