package cli

import (
	"flag"
	"log/slog"
	"net/netip"
	"time"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/session/webhook"
	"github.com/hrns-dev/hrns/store"
)

// webhookOptions are the flags of hrns serve's webhook deliveries.
type webhookOptions struct {
	allow        string
	allowPrivate bool
	timeout      time.Duration
	maxAttempts  int
}

func (o *webhookOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.allow, "webhook-allow", "", "addresses webhook deliveries may reach beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port")
	fs.BoolVar(&o.allowPrivate, "webhook-allow-private", false, "let webhook deliveries reach loopback, private and other non-public addresses (not cloud metadata ones, which only --webhook-allow can allow)")
	fs.DurationVar(&o.timeout, "webhook-timeout", 10*time.Second, "how long one webhook delivery attempt may take")
	fs.IntVar(&o.maxAttempts, "webhook-max-attempts", 10, "attempts of a webhook delivery before it is given up")
}

// service returns the webhooks of st, delivered by the replica id.
func (o *webhookOptions) service(st store.Store, id string, log *slog.Logger) (*webhook.Service, error) {
	if o.timeout <= 0 || o.maxAttempts <= 0 {
		return nil, usagef("--webhook-timeout and --webhook-max-attempts must be positive")
	}
	allow, err := o.allowFunc()
	if err != nil {
		return nil, err
	}
	return webhook.New(st, &webhook.Options{ReplicaID: id, Allow: allow, Timeout: o.timeout, MaxAttempts: o.maxAttempts, Logger: log}), nil
}

// allowFunc is what the flags let deliveries reach beyond the public
// internet.
func (o *webhookOptions) allowFunc() (func(netip.AddrPort) bool, error) {
	list, err := browser.ParseAllowList(o.allow)
	if err != nil {
		return nil, usagef("--webhook-allow: %v", err)
	}
	if !o.allowPrivate {
		return list, nil
	}
	return func(ap netip.AddrPort) bool {
		if list != nil && list(ap) {
			return true
		}
		return !isMetadata(ap.Addr())
	}, nil
}

// isMetadata reports a cloud metadata address, which --webhook-allow-private
// does not open.
func isMetadata(a netip.Addr) bool {
	return netpolicy.Reason(a) == "a cloud metadata address"
}
