package cli

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestServeClosesIdleConnections: a client that makes one request and
// then keeps its connection open, sending nothing, is disconnected once
// the connection has been idle for serveIdleTimeout. Before, only the
// first request's headers had a deadline (ReadHeaderTimeout): a
// connection idle between requests was held for ever, with its
// goroutine and file descriptor, and anyone (no key needed: /healthz)
// could pile them up.
func TestServeClosesIdleConnections(t *testing.T) {
	was := serveIdleTimeout
	serveIdleTimeout = 50 * time.Millisecond
	t.Cleanup(func() { serveIdleTimeout = was })
	s := startServe(t, map[string]string{"OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-tenant"},
		"--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	conn, err := net.Dial("tcp", "127.0.0.1:"+s.port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %d, close %v", resp.StatusCode, resp.Close)
	}
	// The connection is kept alive, and idle: the server must close it.
	// The deadline only bounds a failing test.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	n, err := br.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("an idle connection: read %d bytes, %v; want the server to close it (EOF)", n, err)
	}
}
