package tools

import (
	"net/netip"

	"github.com/hrns-dev/hrns/sandbox"
)

// CommandProxy returns the proxy through which run_command's confined
// commands reach the network with [ShellOptions.PublicNetwork]: it
// refuses what internal/netpolicy refuses (loopback, private, link-local,
// metadata and other non-public addresses, judged on the address dialled)
// and this machine's own addresses, unless allow lets the destination
// through. Other programs the server runs in the sandbox (hrns serve's
// stdio MCP servers) use it to be held to the same policy.
func CommandProxy(allow func(netip.AddrPort) bool) *sandbox.Proxy { return commandProxy(allow) }
