package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/sqlite"
	"github.com/hrns-dev/hrns/tools"
)

// serveOptions are the flags of "hrns serve".
type serveOptions struct {
	addr      string
	db        string
	apiKeyArg bool // --api-key was given: refused
	keysFile  string
	hosts     stringList
	origins   stringList
	config    string
	provider  string
	model     string
	baseURL   string
	agentsDir string
	workdir   string
	// workdirReal is workdir with its links resolved, set by
	// prepareWorkdir.
	workdirReal string
	yes         bool
	workers     int
	maxSteps    int
	drain       time.Duration
}

func (o *serveOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.db, "db", "sqlite:hrns.db", "where sessions are stored: sqlite:PATH, or postgres://... for replicas sharing one database")
	fs.Func("api-key", "refused: a key on the command line is readable by every process of the machine; use HRNS_API_KEYS, --api-keys-file or api_keys in the config file", func(string) error {
		o.apiKeyArg = true
		return nil
	})
	fs.StringVar(&o.keysFile, "api-keys-file", "", "a file of accepted API keys, one a line, readable by its owner only (mode 0600); also HRNS_API_KEYS=k1,k2 and api_keys in the config file")
	fs.Var(&o.hosts, "allowed-host", "a Host name (or HOST:PORT) the API answers besides loopback's, as a proxy or browser sends it (repeatable; also allowed_hosts in the config)")
	fs.Var(&o.origins, "cors-origin", "an origin (https://app.example.com) whose web pages may call the API (repeatable; also cors_origins in the config)")
	fs.StringVar(&o.config, "config", "", "config file (default ~/.config/hrns/config.toml or .yaml)")
	fs.StringVar(&o.provider, "provider", "", "provider: openai, openai-responses, anthropic, or a name from the config file")
	fs.StringVar(&o.model, "model", "", "default model of the agents")
	fs.StringVar(&o.baseURL, "base-url", "", "API base URL of the model (default from OPENAI_BASE_URL or ANTHROPIC_BASE_URL)")
	fs.StringVar(&o.agentsDir, "agents", "", "a folder of agent files (Markdown, as hrns run --agent takes) that callers may name")
	fs.StringVar(&o.workdir, "workdir", "", "root directory of the file and shell tools named agents may use (default: none)")
	fs.BoolVar(&o.yes, "yes", false, "run calls of tools that require approval without waiting for a decision")
	fs.IntVar(&o.workers, "workers", 0, "sessions run at once (default 64)")
	fs.IntVar(&o.maxSteps, "max-steps", 0, "step budget of sessions that set none (default 100)")
	fs.DurationVar(&o.drain, "shutdown-timeout", 10*time.Second, "how long to wait for requests and runs to stop on SIGTERM")
}

// Validate checks the options that do not depend on the environment.
func (o *serveOptions) Validate() error {
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return usagef("--addr %q: %v", o.addr, err)
	}
	if _, _, err := o.store(); err != nil {
		return err
	}
	if o.workers < 0 || o.maxSteps < 0 {
		return usagef("--workers and --max-steps must be positive")
	}
	return nil
}

// store splits --db into the kind of store ("sqlite" or "postgres") and
// where it is (a path, or the DSN).
func (o *serveOptions) store() (kind, where string, err error) {
	scheme, rest, found := strings.Cut(o.db, ":")
	switch {
	case !found:
		return "sqlite", o.db, nil
	case scheme == "sqlite" && rest != "":
		return "sqlite", rest, nil
	case scheme == "postgres" || scheme == "postgresql":
		if _, err := url.Parse(o.db); err != nil {
			return "", "", usagef("--db: %v", err)
		}
		return "postgres", o.db, nil
	}
	return "", "", usagef("--db %q: want sqlite:PATH or postgres://USER@HOST:PORT/DATABASE", o.db)
}

// openStore opens the store of --db and returns it with a description of
// where it is, for the log. PostgreSQL is for several replicas sharing
// one database: HRNS_LEASE_TTL (a Go duration) sets how long the sessions
// of a replica that died wait before another takes them over.
func (o *serveOptions) openStore(ctx context.Context, getenv func(string) string, opts *session.Options) (store.Store, string, error) {
	kind, where, _ := o.store()
	if kind == "sqlite" {
		st, err := sqlite.Open(where, nil)
		return st, where, err
	}
	if v := getenv("HRNS_LEASE_TTL"); v != "" {
		ttl, err := time.ParseDuration(v)
		if err != nil || ttl <= 0 {
			return nil, "", usagef("HRNS_LEASE_TTL=%q: want a positive duration such as 15s", v)
		}
		opts.LeaseTTL = ttl
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := postgres.Open(octx, where, &postgres.Options{Logger: opts.Logger})
	if err != nil {
		return nil, "", err
	}
	u, _ := url.Parse(where)
	return st, u.Redacted(), nil
}

func serveCommand(ctx context.Context, args []string, stdio *IO) error {
	var o serveOptions
	fs := commandFlags("hrns serve", "Usage: hrns serve [flags]\n\nServes the sessions API (/api/v2/sessions) with sessions stored in one SQLite file, or in a PostgreSQL database that several replicas share.", stdio)
	o.flags(fs)
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := loadConfig(o.config, stdio.getenv)
	if err != nil {
		return &usageError{err.Error()}
	}
	keys, err := o.keys(cfg, stdio)
	if err != nil {
		return err
	}
	if len(keys) == 0 && !loopback(o.addr) {
		return usagef("no API keys: set HRNS_API_KEYS=k1,k2, pass --api-keys-file PATH (mode 0600) or set api_keys in the config file (mode 0600) to serve on %s (without keys, hrns serve listens on loopback only)", o.addr)
	}
	if err := o.prepareWorkdir(cfg); err != nil {
		return err
	}
	model, modelName, err := buildModel(&runOptions{config: o.config, provider: o.provider, model: o.model, baseURL: o.baseURL}, cfg, &agentFile{}, stdio.getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stdio.Err, nil))
	opts := &session.Options{
		Environments: map[string]*loop.Toolset{"web": tools.Web(nil)},
		Toolsets:     map[string]*loop.Toolset{},
		Agents:       map[string]*session.AgentConfig{},
		DefaultModel: modelName,
		MaxSteps:     o.maxSteps,
		Workers:      o.workers,
		AutoApprove:  o.yes,
		Logger:       log,
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		ac := &session.AgentConfig{Description: a.Description, Instructions: a.Instructions, Model: a.Model, MaxSteps: firstNonZero(a.MaxTurns, a.MaxSteps)}
		if err := o.addAgent(opts, name, ac, a.Tools, "config"+cfg.where()); err != nil {
			return err
		}
	}
	if o.agentsDir != "" {
		if err := o.loadAgents(opts); err != nil {
			return err
		}
	}
	st, where, err := o.openStore(ctx, stdio.getenv, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	m := session.New(st, model, opts)
	if _, shared := st.(store.Replicas); shared {
		where += ", replica " + m.ReplicaID()
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	if err := m.Start(); err != nil {
		ln.Close()
		return err
	}
	// Long-polls and event streams end when the server stops, instead of
	// holding the shutdown for their whole wait.
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           server.New(m, &server.Options{APIKeys: keys, AllowedHosts: o.allowedHosts(ln.Addr(), keys, cfg), CORSOrigins: append(slices.Clone(o.origins), cfg.CORSOrigins...), Logger: log}),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	if len(keys) == 0 {
		fmt.Fprintln(stdio.Err, "hrns serve: no API keys: anyone who can reach this machine's loopback can use the API")
	}
	fmt.Fprintf(stdio.Err, "hrns serve: listening on http://%s (sessions in %s, model %s)\n", ln.Addr(), where, modelName)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	fmt.Fprintln(stdio.Err, "hrns serve: stopping; running sessions stay resumable")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.drain)
	defer cancel()
	cancelRequests()
	shutdownErr := srv.Shutdown(sctx)
	stopErr := m.Stop(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, shutdownErr, stopErr)
}

// loadAgents reads the agent files of --agents: each names its agent (or
// the file does), its instructions (the body), model, step budget and
// tools. web_fetch (or "web") comes from the web environment; the other
// built-in tools work in --workdir and only named agents may have them.
func (o *serveOptions) loadAgents(opts *session.Options) error {
	files, err := filepath.Glob(filepath.Join(o.agentsDir, "*.md"))
	if err != nil {
		return usagef("--agents: %v", err)
	}
	if len(files) == 0 {
		return usagef("--agents %s: no agent files (*.md)", o.agentsDir)
	}
	for _, f := range files {
		a, err := (&runOptions{agentFile: f}).loadAgent()
		if err != nil {
			return err
		}
		name := firstString(a.Name, strings.TrimSuffix(filepath.Base(f), ".md"))
		cfg := &session.AgentConfig{Description: a.Description, Instructions: a.System, Model: a.Model, MaxSteps: a.MaxTurns}
		if err := o.addAgent(opts, name, cfg, a.Tools, f); err != nil {
			return err
		}
	}
	return nil
}

// addAgent offers an agent by name, with its tools: web_fetch (or "web")
// comes from the web environment; the other built-in tools work in
// --workdir, and only named agents may have them. source names where the
// agent was defined, for errors.
func (o *serveOptions) addAgent(opts *session.Options, name string, cfg *session.AgentConfig, toolNames []string, source string) error {
	if _, dup := opts.Agents[name]; dup {
		return usagef("agent %q is defined twice (again in %s)", name, source)
	}
	var builtin []string
	for _, t := range toolNames {
		switch t {
		case "web", "web_fetch":
			cfg.Toolsets = append(cfg.Toolsets, "web")
		default:
			builtin = append(builtin, t)
		}
	}
	if len(builtin) > 0 {
		if o.workdir == "" {
			return usagef("agent %s (%s) uses %s: start hrns serve with --workdir DIR for file and shell tools", name, source, strings.Join(builtin, ", "))
		}
		ws, err := o.workspace(builtin)
		if err != nil {
			return usagef("agent %s (%s): %v", name, source, err)
		}
		cfg.Workspace = ws
	}
	opts.Agents[name] = cfg
	return nil
}
