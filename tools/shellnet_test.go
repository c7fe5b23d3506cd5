package tools

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/hrns-dev/hrns/sandbox"
)

// TestCommandProxyDial: the proxy of commands given the public internet
// refuses, on the address it would connect to, what web_fetch refuses (a
// name that resolves to loopback, every written form of it) and lets
// through only what the operator allows.
func TestCommandProxyDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := netip.MustParseAddrPort(ln.Addr().String()).Port()
	p := netip.MustParseAddrPort(ln.Addr().String()).String()
	_, ps, _ := net.SplitHostPort(p)
	for _, tc := range []struct {
		addr    string
		allow   func(netip.AddrPort) bool
		refused bool
	}{
		{addr: p, refused: true},
		{addr: "localhost:" + ps, refused: true},
		{addr: "[::ffff:127.0.0.1]:" + ps, refused: true},
		{addr: "0x7f000001:" + ps, refused: true},
		{addr: "127.1:" + ps, refused: true},
		{addr: "10.0.0.1:80", refused: true},
		{addr: "169.254.169.254:80", refused: true},
		{addr: "[fd00:ec2::254]:80", refused: true},
		{addr: p, allow: func(ap netip.AddrPort) bool { return ap.Port() == port && ap.Addr().IsLoopback() }},
		{addr: "10.0.0.1:80", allow: func(ap netip.AddrPort) bool { return ap.Port() == port }, refused: true},
	} {
		c, err := commandProxy(tc.allow).Dial(t.Context(), "tcp", tc.addr)
		if c != nil {
			c.Close()
		}
		if got := errors.Is(err, sandbox.ErrDestinationRefused); got != tc.refused || (!tc.refused && err != nil) {
			t.Errorf("%s (allow %v): %v", tc.addr, tc.allow != nil, err)
		}
	}
	// This machine's own addresses, beyond loopback, are refused too.
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		_, err := commandProxy(nil).Dial(t.Context(), "tcp", netip.AddrPortFrom(ip.Unmap(), port).String())
		if !errors.Is(err, sandbox.ErrDestinationRefused) {
			t.Errorf("this machine's %v: %v", ip, err)
		}
	}
}
