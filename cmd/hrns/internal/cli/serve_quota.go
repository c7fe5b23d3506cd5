package cli

import (
	"flag"
	"path/filepath"

	"github.com/hrns-dev/hrns/platform/quota"
)

// QuotaConfig is the [quota] table of the config file: the token quota
// hrns serve gives each API key. At most one of its fields is set; the
// flags --tokens-per-day and --tokens-per-month override it.
type QuotaConfig struct {
	// TokensPerDay limits the tokens (input plus output) each key's
	// sessions use per calendar day (UTC).
	TokensPerDay int64 `toml:"tokens_per_day" yaml:"tokens_per_day"`
	// TokensPerMonth limits them per calendar month (UTC).
	TokensPerMonth int64 `toml:"tokens_per_month" yaml:"tokens_per_month"`
}

// quotaFlags are hrns serve's token quota flags.
type quotaFlags struct {
	perDay, perMonth int64
}

func (q *quotaFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&q.perDay, "tokens-per-day", 0, "tokens (input plus output) each API key's sessions may use per day (UTC); over it, new sessions and messages get 429 and running sessions stop (default no limit; also [quota] tokens_per_day in the config)")
	fs.Int64Var(&q.perMonth, "tokens-per-month", 0, "the same per calendar month (UTC; also [quota] tokens_per_month in the config)")
}

// tokenQuota is the token quota of the flags, or else of the config file.
// Tokens are counted per month without one.
func (q *quotaFlags) tokenQuota(cfg *Config) (*quota.Tokens, error) {
	day, month, where := q.perDay, q.perMonth, "--tokens-per-day and --tokens-per-month"
	if day == 0 && month == 0 {
		day, month, where = cfg.Quota.TokensPerDay, cfg.Quota.TokensPerMonth, "[quota] tokens_per_day and tokens_per_month"+cfg.where()
	}
	switch {
	case day < 0 || month < 0:
		return nil, usagef("%s must be positive", where)
	case day > 0 && month > 0:
		return nil, usagef("%s: set one of them", where)
	case day > 0:
		return &quota.Tokens{Limit: day, Period: quota.PeriodDay}, nil
	case month > 0:
		return &quota.Tokens{Limit: month, Period: quota.PeriodMonth}, nil
	}
	return nil, nil
}

// workspaces is the directory of the sessions' workspaces that the API's
// session files operations serve: DIR/sessions of --workdir, where the
// agents' file tools work, each session in DIR/sessions/NAME; none
// without --workdir.
func (o *serveOptions) workspaces() string {
	if o.workdirReal == "" {
		return ""
	}
	return filepath.Join(o.workdirReal, "sessions")
}
