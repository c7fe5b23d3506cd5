package tools

import (
	"net/netip"
	"testing"
)

func TestBlockReason(t *testing.T) {
	for addr, want := range map[string]string{
		"8.8.8.8":              "",
		"1.1.1.1":              "",
		"2606:4700::1111":      "",
		"127.0.0.1":            "a loopback address",
		"127.255.0.9":          "a loopback address",
		"::1":                  "a loopback address",
		"::ffff:10.1.2.3":      "a private address",
		"169.254.169.254":      "a cloud metadata address",
		"fd00:ec2::254":        "a cloud metadata address",
		"fe80::1":              "a link-local address",
		"ff02::1":              "a multicast address",
		"239.255.255.250":      "a multicast address",
		"255.255.255.255":      "a reserved address",
		"198.18.0.1":           "a reserved address",
		"64:ff9b::8.8.8.8":     "",
		"64:ff9b::192.168.0.1": "a private address (inside a NAT64 address)",
	} {
		if got := blockReason(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
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
		a, ok := parseLooseIPv4(in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
