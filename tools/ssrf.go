package tools

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/hrns-dev/hrns/internal/netpolicy"
)

// web_fetch's address policy is internal/netpolicy's, so that every tool
// that reaches the network for a model refuses the same addresses.

// checkHost refuses a URL host written as a number in a loose notation.
func checkHost(host string) error {
	if err := netpolicy.CheckHost(host); err != nil {
		return fmt.Errorf("web_fetch %w", err)
	}
	return nil
}

// blockedError rewords a refusal of the policy for the model, without the
// address refused: a model working for an API key of hrns serve must not
// learn what the deployment's names resolve to (netpolicy.Refusal).
func blockedError(_ *netpolicy.BlockedError, hint string) error {
	msg := "web_fetch " + netpolicy.Refusal
	if hint != "" {
		msg += " (" + hint + ")"
	}
	return errors.New(msg)
}

// newDialer returns the dialer of web_fetch: every connection it makes,
// after DNS resolution and for every redirect, is checked against the
// policy unless allowPrivate is set or exempt lets the address through.
func newDialer(allowPrivate bool, exempt func(netip.AddrPort) bool) *net.Dialer {
	d := &net.Dialer{}
	if !allowPrivate {
		d.Control = netpolicy.Control(exempt)
	}
	return d
}
