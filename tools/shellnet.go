package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/sandbox"
)

// commandProxy is the proxy of commands given the public network
// ([ShellOptions.PublicNetwork]): each destination is dialled here, in
// this process, after name resolution, and refused when netpolicy refuses
// its address or it is an address of this machine (a server listening on
// all addresses, this one included), unless allow lets it through.
func commandProxy(allow func(netip.AddrPort) bool) *sandbox.Proxy {
	base := netpolicy.Control(allow)
	d := &net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		if err := base(network, address, c); err != nil {
			return err
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if (allow == nil || !allow(ap)) && netpolicy.IsOwnAddress(ap.Addr()) {
			return &netpolicy.BlockedError{Addr: ap.Addr().Unmap(), Reason: "an address of this machine"}
		}
		return nil
	}}
	return &sandbox.Proxy{Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if err := netpolicy.CheckHost(host); err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrDestinationRefused, err)
		}
		c, err := d.DialContext(ctx, "tcp", address)
		if be, ok := errors.AsType[*netpolicy.BlockedError](err); ok {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrDestinationRefused, be)
		}
		return c, err
	}}
}
