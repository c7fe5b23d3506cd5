package browser

import (
	"fmt"
	"net/netip"

	"github.com/hrns-dev/hrns/internal/netpolicy"
)

// ParseAllowList reads an operator's allow-list for [Options.Allow]: a
// comma-separated list of addresses (10.0.0.5), address prefixes
// (10.0.0.0/8) and address:port pairs (127.0.0.1:8080, [::1]:8080). An
// empty list gives nil (nothing allowed beyond the policy).
func ParseAllowList(s string) (func(netip.AddrPort) bool, error) {
	allow, err := netpolicy.ParseAllowList(s)
	if err != nil {
		return nil, fmt.Errorf("browser: %w", err)
	}
	return allow, nil
}
