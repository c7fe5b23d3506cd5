package cli

import (
	"flag"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/store"
)

// webhookOptions are the flags of hrns serve's webhook deliveries.
type webhookOptions struct {
	allow        string
	allowPrivate bool
	timeout      time.Duration
	maxAttempts  int
}

// WebhooksConfig is the [webhooks] table of the config file: how hrns
// serve delivers webhooks. A flag given overrides its key; a project's
// .hrns/config.toml may not set it.
type WebhooksConfig struct {
	// Allow lists addresses deliveries may reach beyond the public
	// internet: IPs, prefixes (10.0.0.0/8) or IP:port (--webhook-allow).
	Allow []string `toml:"allow" yaml:"allow"`
	// AllowPrivate lets deliveries reach loopback, private and other
	// non-public addresses, not cloud metadata ones
	// (--webhook-allow-private).
	AllowPrivate bool `toml:"allow_private" yaml:"allow_private"`
	// Timeout bounds one delivery attempt, as a Go duration ("10s";
	// --webhook-timeout).
	Timeout string `toml:"timeout" yaml:"timeout"`
	// MaxAttempts is how many attempts a delivery gets before it is
	// given up (--webhook-max-attempts).
	MaxAttempts int `toml:"max_attempts" yaml:"max_attempts"`
}

// The defaults of the webhook deliveries.
const (
	defaultWebhookTimeout     = 10 * time.Second
	defaultWebhookMaxAttempts = 10
)

func (o *webhookOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.allow, "webhook-allow", "", "addresses webhook deliveries may reach beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port (also [webhooks] allow in the config)")
	fs.BoolVar(&o.allowPrivate, "webhook-allow-private", false, "let webhook deliveries reach loopback, private and other non-public addresses (not cloud metadata ones, which only --webhook-allow can allow; also [webhooks] allow_private)")
	fs.DurationVar(&o.timeout, "webhook-timeout", 0, "how long one webhook delivery attempt may take (default 10s; also [webhooks] timeout)")
	fs.IntVar(&o.maxAttempts, "webhook-max-attempts", 0, "attempts of a webhook delivery before it is given up (default 10; also [webhooks] max_attempts)")
}

// resolve fills what the flags left unset from the config's [webhooks],
// then from the defaults.
func (o *webhookOptions) resolve(cfg *Config) error {
	c := cfg.Webhooks
	if o.allow == "" && len(c.Allow) > 0 {
		o.allow = strings.Join(c.Allow, ",")
	}
	o.allowPrivate = o.allowPrivate || c.AllowPrivate
	if o.timeout == 0 && c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 {
			return usagef("[webhooks] timeout%s: %q is not a positive duration such as \"10s\"", cfg.where(), c.Timeout)
		}
		o.timeout = d
	}
	if o.maxAttempts == 0 && c.MaxAttempts != 0 {
		if c.MaxAttempts < 0 {
			return usagef("[webhooks] max_attempts%s must be positive", cfg.where())
		}
		o.maxAttempts = c.MaxAttempts
	}
	if o.timeout < 0 || o.maxAttempts < 0 {
		return usagef("--webhook-timeout and --webhook-max-attempts must be positive")
	}
	if o.timeout == 0 {
		o.timeout = defaultWebhookTimeout
	}
	if o.maxAttempts == 0 {
		o.maxAttempts = defaultWebhookMaxAttempts
	}
	return nil
}

// service returns the webhooks of st, delivered by the replica id, as the
// flags and then the config's [webhooks] say.
func (o *webhookOptions) service(st store.Store, cfg *Config, id string, log *slog.Logger) (*webhook.Service, error) {
	if err := o.resolve(cfg); err != nil {
		return nil, err
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
		return !netpolicy.IsMetadata(ap.Addr())
	}, nil
}
