package browser

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseAllowList reads an operator's allow-list for [Options.Allow]: a
// comma-separated list of addresses (10.0.0.5), address prefixes
// (10.0.0.0/8) and address:port pairs (127.0.0.1:8080, [::1]:8080). An
// empty list gives nil (nothing allowed beyond the policy).
func ParseAllowList(s string) (func(netip.AddrPort) bool, error) {
	var (
		prefixes []netip.Prefix
		ports    = map[netip.AddrPort]bool{}
	)
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			prefixes = append(prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil {
			prefixes = append(prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if ap, err := netip.ParseAddrPort(item); err == nil {
			ports[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
			continue
		}
		return nil, fmt.Errorf("browser: %q in the allow-list is not an address, a prefix (10.0.0.0/8) or an address:port", item)
	}
	if len(prefixes) == 0 && len(ports) == 0 {
		return nil, nil
	}
	return func(ap netip.AddrPort) bool {
		a := ap.Addr().Unmap()
		if ports[netip.AddrPortFrom(a, ap.Port())] {
			return true
		}
		for _, p := range prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}, nil
}
