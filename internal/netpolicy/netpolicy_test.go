package netpolicy_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/internal/netpolicy"
)

func TestReason(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700::1111", ""},
		{"127.0.0.1", "a loopback address"},
		{"127.255.0.9", "a loopback address"},
		{"::1", "a loopback address"},
		{"::", "an unspecified address"},
		{"169.254.169.254", "a cloud metadata address"},
		{"fd00:ec2::254", "a cloud metadata address"},
		{"fe80::1", "a link-local address"},
		{"ff02::1", "a multicast address"},
		{"239.255.255.250", "a multicast address"},
		{"255.255.255.255", "a reserved address"},
		{"198.18.0.1", "a reserved address"},
		{"2001:db8::1", "a reserved address"},
		{"100::1", "a reserved address"},

		// IPv4-mapped.
		{"::ffff:127.0.0.1", "a loopback address"},
		{"::ffff:10.1.2.3", "a private address"},
		{"::ffff:8.8.8.8", ""},
		// IPv4-compatible (deprecated): the red team's [::127.0.0.1].
		{"::127.0.0.1", "a loopback address (inside an IPv4-compatible address)"},
		{"::169.254.169.254", "a cloud metadata address (inside an IPv4-compatible address)"},
		{"::8.8.8.8", "a deprecated IPv4-compatible address"},
		// IPv4-translated: the red team's [::ffff:0:127.0.0.1].
		{"::ffff:0:127.0.0.1", "a loopback address (inside an IPv4-translated address)"},
		{"::ffff:0:10.0.0.1", "a private address (inside an IPv4-translated address)"},
		{"::ffff:0:0.0.0.0", "an unspecified address (inside an IPv4-translated address)"},
		{"::ffff:0:8.8.8.8", ""},
		// NAT64, well-known prefix.
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b::192.168.0.1", "a private address (inside a NAT64 address)"},
		{"64:ff9b::127.0.0.1", "a loopback address (inside a NAT64 address)"},
		{"64:ff9b::169.254.169.254", "a cloud metadata address (inside a NAT64 address)"},
		// NAT64, local-use prefix: refused whole.
		{"64:ff9b:1::7f00:1", "a local-use NAT64 address"},
		{"64:ff9b:1:7f00:1::", "a local-use NAT64 address"},
		{"64:ff9b:1::8.8.8.8", "a local-use NAT64 address"},
		// 6to4: the IPv4 address follows 2002:.
		{"2002:7f00:1::", "a loopback address (inside a 6to4 address)"},
		{"2002:a9fe:a9fe::1", "a cloud metadata address (inside a 6to4 address)"},
		{"2002:c0a8:1::", "a private address (inside a 6to4 address)"},
		{"2002:808:808::1", ""},
		// Teredo: the server in bits 32-63, the client inverted at the end.
		{"2001:0:7f00:1::", "a loopback address (inside a Teredo address (its server))"},
		{"2001:0:808:808::80ff:fffe", "a loopback address (inside a Teredo address (its client))"},
		{"2001:0:808:808::f5ff:fffe", "a private address (inside a Teredo address (its client))"},
		{"2001:0:808:808::f7f7:f7f7", ""},
		// ISATAP interface identifier.
		{"2606:4700::5efe:7f00:1", "a loopback address (inside an ISATAP address)"},
		{"2606:4700::200:5efe:a00:1", "a private address (inside an ISATAP address)"},
		// Mapped forms nest: ::ffff: around nothing else parses, but a
		// mapped address is judged unmapped.
		{"::ffff:169.254.169.254", "a cloud metadata address"},
	} {
		if got := netpolicy.Reason(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestControl(t *testing.T) {
	control := netpolicy.Control(nil)
	for _, addr := range []string{"[::127.0.0.1]:80", "[::ffff:0:127.0.0.1]:443", "127.0.0.1:80", "[2002:7f00:1::]:80"} {
		err := control("tcp", addr, nil)
		var be *netpolicy.BlockedError
		if !errors.As(err, &be) {
			t.Errorf("%s: %v, want a *BlockedError", addr, err)
		}
	}
	if err := control("tcp", "8.8.8.8:53", nil); err != nil {
		t.Errorf("8.8.8.8: %v", err)
	}
	exempt := netpolicy.Control(func(ap netip.AddrPort) bool { return ap.Port() == 8080 })
	if err := exempt("tcp", "127.0.0.1:8080", nil); err != nil {
		t.Errorf("exempt: %v", err)
	}
	if err := control("tcp", "not an address", nil); err == nil {
		t.Errorf("a malformed address passed")
	}
}

func TestCheckHost(t *testing.T) {
	for host, refused := range map[string]bool{
		"0x7f000001": true, "2130706433": true, "127.1": true,
		"example.com": false, "127.0.0.1": false, "[::1]": false,
	} {
		if err := netpolicy.CheckHost(host); (err != nil) != refused {
			t.Errorf("%s: %v", host, err)
		}
	}
}

func TestParseLooseIPv4(t *testing.T) {
	for in, want := range map[string]string{
		"0x7f000001":   "127.0.0.1",
		"2130706433":   "127.0.0.1",
		"0177.0.0.1":   "127.0.0.1",
		"127.1":        "127.0.0.1",
		"10.1.256":     "10.1.1.0",
		"0x7f.1":       "127.0.0.1",
		"0":            "0.0.0.0",
		"example.com":  "",
		"1.2.3.4.5":    "",
		"256.0.0.1":    "",
		"08.0.0.1":     "", // not octal
		"4294967296":   "",
		"127.0.0.1.":   "",
		"0x":           "0.0.0.0",
		"1e3.example":  "",
		"xn--abc.test": "",
	} {
		a, ok := netpolicy.ParseLooseIPv4(in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestIsMetadata checks the metadata addresses in every form that carries
// them, and that other non-public addresses are not taken for them.
func TestIsMetadata(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"169.254.169.254", true},
		{"::ffff:169.254.169.254", true},
		{"64:ff9b::a9fe:a9fe", true}, // NAT64
		{"2002:a9fe:a9fe::1", true},  // 6to4
		{"::169.254.169.254", true},  // IPv4-compatible
		{"fd00:ec2::254", true},      // AWS's IPv6 one
		{"169.254.1.1", false},       // link-local, not metadata
		{"127.0.0.1", false},         // loopback
		{"64:ff9b::7f00:1", false},   // NAT64 loopback
		{"10.0.0.1", false},          // private
		{"93.184.216.34", false},     // public
	} {
		if got := netpolicy.IsMetadata(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("IsMetadata(%s) = %v, want %v (Reason %q)", tc.addr, got, tc.want, netpolicy.Reason(netip.MustParseAddr(tc.addr)))
		}
	}
}

// TestIsOwnAddress: the addresses of this machine's interfaces are its
// own, others are not.
func TestIsOwnAddress(t *testing.T) {
	if !netpolicy.IsOwnAddress(netip.MustParseAddr("127.0.0.1")) {
		t.Error("127.0.0.1 is not this machine's")
	}
	if !netpolicy.IsOwnAddress(netip.MustParseAddr("::ffff:127.0.0.1")) {
		t.Error("::ffff:127.0.0.1 is not this machine's")
	}
	if netpolicy.IsOwnAddress(netip.MustParseAddr("192.0.2.77")) {
		t.Error("a documentation address is this machine's")
	}
}

func TestParseAllowList(t *testing.T) {
	allow, err := netpolicy.ParseAllowList(" 10.0.0.0/8, 127.0.0.1:8080 ,192.168.1.5,[::1]:9000")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ap   string
		want bool
	}{
		{"10.1.2.3:80", true},
		{"127.0.0.1:8080", true},
		{"127.0.0.1:8081", false},
		{"[::ffff:127.0.0.1]:8080", true},
		{"192.168.1.5:1", true},
		{"192.168.1.6:1", false},
		{"[::1]:9000", true},
		{"[::1]:9001", false},
	}
	for _, tt := range tests {
		if got := allow(netip.MustParseAddrPort(tt.ap)); got != tt.want {
			t.Errorf("allow(%s) = %v, want %v", tt.ap, got, tt.want)
		}
	}
	if f, err := netpolicy.ParseAllowList(" , "); err != nil || f != nil {
		t.Errorf("an empty list: %v, %v", f != nil, err)
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3.4:x"} {
		if _, err := netpolicy.ParseAllowList(bad); err == nil || !strings.Contains(err.Error(), "allow-list") {
			t.Errorf("ParseAllowList(%q): %v", bad, err)
		}
	}
}
