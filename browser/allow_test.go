package browser_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/browser"
)

func TestParseAllowList(t *testing.T) {
	allow, err := browser.ParseAllowList(" 10.1.0.0/16, 192.168.1.7 ,127.0.0.1:8080,[::1]:9")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"10.1.2.3:80":             true,
		"10.2.0.1:80":             false,
		"192.168.1.7:443":         true,
		"192.168.1.8:443":         false,
		"127.0.0.1:8080":          true,
		"127.0.0.1:8081":          false,
		"[::ffff:127.0.0.1]:8080": true,
		"[::1]:9":                 true,
		"[::1]:10":                false,
	} {
		if got := allow(netip.MustParseAddrPort(addr)); got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
	if f, err := browser.ParseAllowList(" , "); f != nil || err != nil {
		t.Errorf("an empty list: %v %v", f != nil, err)
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3.4:99999", "example.com:80"} {
		if _, err := browser.ParseAllowList(bad); err == nil || !strings.Contains(err.Error(), "allow-list") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
