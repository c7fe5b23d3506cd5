//go:build linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FuzzProxy feeds what a command may send the proxy (a SOCKS5 handshake,
// an HTTP request, anything) and checks that the proxy answers or closes
// once the client has said all it will, without dialling anything but
// what Dial was asked, and without panicking.
func FuzzProxy(f *testing.F) {
	for _, seed := range []string{
		"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
		"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x15\x38",
		"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50",
		"\x05\x02\x01\x02",
		"\x05\x01\x00\x05\x02\x00\x01\x01\x02\x03\x04\x00\x50",
		"\x05\xff",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
		"GET http://127.0.0.1:5432/ HTTP/1.1\r\nHost: 127.0.0.1:5432\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello",
		"",
	} {
		f.Add([]byte(seed))
	}
	ctl, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		f.Fatal(err)
	}
	defer unix.Close(ctl[1])
	s := serveProxy(os.NewFile(uintptr(ctl[0]), "ctl"), &Proxy{Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if _, _, err := net.SplitHostPort(address); err != nil {
			return nil, errors.New("bad address")
		}
		return nil, ErrDestinationRefused
	}})
	defer s.close()
	f.Fuzz(func(t *testing.T, in []byte) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		client := fileConn(t, fds[0])
		defer client.Close()
		s.adopt(fileConn(t, fds[1]))
		client.SetDeadline(time.Now().Add(20 * time.Second))
		go func() {
			client.Write(in)
			client.(*net.UnixConn).CloseWrite()
		}()
		if _, err := io.Copy(io.Discard, client); err != nil {
			t.Fatalf("the proxy neither answered nor closed: %v", err)
		}
	})
}

// TestProxyConnsBounded: the proxy serves at most MaxConns connections at
// once (one more is closed unanswered), and a connection gives its room
// back when it ends, whichever way it was served.
func TestProxyConnsBounded(t *testing.T) {
	ctl, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ctl[1])
	s := serveProxy(os.NewFile(uintptr(ctl[0]), "ctl"), &Proxy{MaxConns: 2, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, ErrDestinationRefused
	}})
	defer s.close()
	open := func() net.Conn {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.adopt(fileConn(t, fds[1]))
		c := fileConn(t, fds[0])
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	ask := func(c net.Conn, req string) string {
		if _, err := io.WriteString(c, req); err != nil {
			return "" // closed unanswered
		}
		b, _ := io.ReadAll(c)
		return string(b)
	}
	const get = "GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\nConnection: close\r\n\r\n"
	const socks = "\x05\x01\x00\x05\x01\x00\x01\x0a\x00\x00\x01\x00\x50"
	for i := range 10 {
		if got := ask(open(), get); !strings.Contains(got, "403 Forbidden") {
			t.Fatalf("request %d: %q", i, got)
		}
		if got := ask(open(), socks); got != "\x05\x00\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00" {
			t.Fatalf("SOCKS5 request %d: %q", i, got)
		}
	}
	a, b := open(), open()
	defer a.Close()
	defer b.Close()
	// Both rooms are taken once each proxy connection has begun.
	io.WriteString(a, "GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n")
	io.WriteString(b, "GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n")
	for _, c := range []net.Conn{a, b} {
		buf := make([]byte, 12)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 403" {
			t.Fatalf("%q, %v", buf, err)
		}
	}
	if got := ask(open(), get); got != "" {
		t.Errorf("a third connection was served: %q", got)
	}
	a.Close()
	b.Close()
	for range 200 {
		if len(s.sem) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ask(open(), get); !strings.Contains(got, "403 Forbidden") {
		t.Errorf("after the two ended: %q", got)
	}
}

func fileConn(t *testing.T, fd int) net.Conn {
	f := os.NewFile(uintptr(fd), "conn")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
