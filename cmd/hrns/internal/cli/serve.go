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
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/desktop"
	"github.com/hrns-dev/hrns/internal/gctune"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/sqlite"
	"github.com/hrns-dev/hrns/tools"
)

// serveGCHeadroom is what hrns serve lets its heap grow by between two
// collections, at least (see package gctune): unless GOGC or GOMEMLIMIT
// is set, it holds up to this much more memory than with GOGC=100.
const serveGCHeadroom = 32 << 20

// serveOptions are the flags of "hrns serve".
type serveOptions struct {
	addr      string
	db        string
	apiKeyArg bool // --api-key was given: refused
	keysFile  string
	// opKeysFile is --operator-keys-file (serve_guard.go).
	opKeysFile string
	hosts      stringList
	origins    stringList
	publicURL  string
	config     string
	provider   string
	model      string
	baseURL    string
	agentsDir  string
	workdir    string
	// workdirReal is workdir with its links resolved, set by
	// prepareWorkdir.
	workdirReal string
	yes         bool
	// commandNetwork lets every agent's commands use the public
	// internet through the proxy (--command-network); an agent of the
	// config may have it alone (network = true). commandNetAllow is
	// --command-network-allow: destinations beyond the public internet.
	commandNetwork  bool
	commandNetAllow string
	// workstation offers the environment kind "workstation" to callers'
	// agents (serve_workstation.go).
	workstation bool
	// workstationNetwork gives the workstation environment's commands
	// the public internet through the proxy (--workstation-network).
	workstationNetwork bool
	workers            int
	maxActive          int
	maxSteps           int
	drain              time.Duration
	quota              quotaFlags
	// reads bound one key's reads of events and long-polls
	// (serve_reads.go).
	reads readFlags
	// browser flags (cmd/hrns/internal/cli/browser.go)
	browserAllow    string
	browserProfiles string
	// profileLimits bound the browser profiles callers upload
	// (--browser-profile-max-bytes, --browser-profile-max-unpacked-bytes).
	profileLimits server.ProfileOptions
	// live holds the sessions' running browsers, for the page's live view.
	live browser.Live
	// liveDesktops holds the sessions' running desktops, for the page's
	// live view (desktop.go).
	liveDesktops desktop.Live
	// mcp are the flags of callers' MCP servers (serve_mcp.go).
	mcp mcpFlags
	// vaultKeyFile holds the vault keys (cmd/hrns/internal/cli/serve_vault.go).
	vaultKeyFile string
	webhooks     webhookOptions
	// sqliteSync is --sqlite-sync: "full" or "normal" (sqlite.Options.RelaxedSync).
	sqliteSync string
}

func (o *serveOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.db, "db", "sqlite:hrns.db", "where sessions are stored: sqlite:PATH, or postgres://... for replicas sharing one database")
	fs.StringVar(&o.sqliteSync, "sqlite-sync", "full", "when a SQLite store's commit returns: full, once on disk (it survives a power loss); normal, once written to the system (it survives the process's crash, kill -9, but the last commits may be lost in a power loss or the machine's crash), without waiting for the disk")
	fs.Func("api-key", "refused: a key on the command line is readable by every process of the machine; use HRNS_API_KEYS, --api-keys-file or api_keys in the config file", func(string) error {
		o.apiKeyArg = true
		return nil
	})
	fs.StringVar(&o.keysFile, "api-keys-file", "", "a file of accepted API keys, one a line, readable by its owner only (mode 0600); also HRNS_API_KEYS=k1,k2 and api_keys in the config file")
	fs.StringVar(&o.opKeysFile, "operator-keys-file", "", "a file of operator keys, one a line, readable by its owner only (mode 0600): they read GET /api/v2/replicas and /healthz's details and nothing else, and may not be API keys too; also HRNS_OPERATOR_KEYS=k1,k2 and operator_keys in the config file")
	fs.StringVar(&o.vaultKeyFile, "vault-key-file", "", "a file of the keys that encrypt vaults (ID:BASE64 of 32 bytes, the primary first), readable by its owner only (mode 0600); also HRNS_VAULT_KEY")
	fs.Var(&o.hosts, "allowed-host", "a Host name (or HOST:PORT) the API answers besides loopback's, as a proxy or browser sends it (repeatable; also allowed_hosts in the config)")
	fs.StringVar(&o.publicURL, "public-url", "", "the server's address as clients reach it (https://hrns.example.com, with a proxy's path prefix if any), which share URLs are made from (default: each request's scheme and Host; also public_url in the config)")
	fs.Var(&o.origins, "cors-origin", "an origin (https://app.example.com) whose web pages may call the API (repeatable; also cors_origins in the config)")
	fs.StringVar(&o.config, "config", "", "config file (default ~/.config/hrns/config.toml or .yaml)")
	fs.StringVar(&o.provider, "provider", "", "provider: openai, openai-responses, anthropic, gemini, or a name from the config file")
	fs.StringVar(&o.model, "model", "", "default model of the agents")
	fs.StringVar(&o.baseURL, "base-url", "", "API base URL of the model (default from OPENAI_BASE_URL or ANTHROPIC_BASE_URL)")
	fs.StringVar(&o.agentsDir, "agents", "", "a folder of agent files (Markdown, as hrns run --agent takes) that callers may name")
	fs.StringVar(&o.workdir, "workdir", "", "root directory of the file and shell tools named agents may use (default: none)")
	fs.BoolVar(&o.yes, "yes", false, "run calls of tools that require approval without waiting for a decision")
	fs.BoolVar(&o.workstationNetwork, "workstation-network", false, "let the commands of the workstation environment reach the public internet, through the proxy that refuses loopback, private, link-local, metadata and this machine's own addresses (--command-network-allow lists more); by default they have none")
	fs.BoolVar(&o.workstation, "workstation", false, "offer callers' agents the environment kind workstation: a sandboxed shell (run_command), the file tools in the session's workspace and the browser (needs --workdir)")
	fs.BoolVar(&o.commandNetwork, "command-network", false, "let the commands of every agent (run_command, and run_code's) reach the public internet, through a proxy that refuses loopback, private, link-local and metadata addresses and this machine's own (default: no network; network = true in [agents.NAME] for one agent)")
	fs.StringVar(&o.commandNetAllow, "command-network-allow", "", "addresses the commands of agents given the network may reach beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port (also network_allow in [agents.NAME], for one agent)")
	fs.IntVar(&o.workers, "workers", 0, "sessions run at once (default 64)")
	fs.IntVar(&o.maxActive, "max-sessions-per-key", 0, "active sessions an API key may have at once; more wait as queued, or get 429 with queue: false (default no limit)")
	fs.IntVar(&o.maxSteps, "max-steps", 0, "step budget of sessions that set none (default 100)")
	o.quota.register(fs)
	o.reads.register(fs)
	fs.DurationVar(&o.drain, "shutdown-timeout", 10*time.Second, "how long hrns serve waits on SIGTERM, in all, for requests, runs, the schedules' and webhooks' workers and the store to stop; what is still running then is abandoned (and logged), and the process exits")
	fs.StringVar(&o.browserAllow, "browser-allow", "", "addresses the web environment's browser may reach beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port")
	fs.StringVar(&o.browserProfiles, "browser-profiles", "", "where sessions' browser profiles are kept while they wait (default: a directory in the system's temporary directory)")
	fs.Int64Var(&o.profileLimits.MaxArchiveBytes, "browser-profile-max-bytes", 64<<20, "the largest browser profile archive a caller may upload (/api/v2/browser-profiles; 413 beyond)")
	fs.Int64Var(&o.profileLimits.Unpacked.MaxBytes, "browser-profile-max-unpacked-bytes", 512<<20, "the most a browser profile archive may unpack to (422 beyond)")
	o.webhooks.flags(fs)
	o.mcp.register(fs)
}

// Validate checks the options that do not depend on the environment.
func (o *serveOptions) Validate() error {
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return usagef("--addr %q: %v", o.addr, err)
	}
	kind, _, err := o.store()
	if err != nil {
		return err
	}
	switch o.sqliteSync {
	case "", "full", "normal":
	default:
		return usagef("--sqlite-sync %q: want full or normal", o.sqliteSync)
	}
	if o.sqliteSync == "normal" && kind != "sqlite" {
		return usagef("--sqlite-sync applies to a SQLite store: a PostgreSQL server's own settings (synchronous_commit) say when its commits return")
	}
	if o.workers < 0 || o.maxSteps < 0 || o.maxActive < 0 {
		return usagef("--workers, --max-steps and --max-sessions-per-key must be positive")
	}
	if o.drain <= 0 {
		return usagef("--shutdown-timeout must be positive (%s given)", o.drain)
	}
	if err := o.reads.validate(); err != nil {
		return err
	}
	if o.profileLimits.MaxArchiveBytes < 1 || o.profileLimits.Unpacked.MaxBytes < 1 {
		return usagef("--browser-profile-max-bytes and --browser-profile-max-unpacked-bytes must be positive")
	}
	if _, err := browser.ParseAllowList(o.commandNetAllow); err != nil {
		return usagef("--command-network-allow: %v", err)
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
		st, err := sqlite.Open(where, &sqlite.Options{RelaxedSync: o.sqliteSync == "normal"})
		if o.sqliteSync == "normal" {
			where += " (--sqlite-sync normal: a commit survives the process's crash, not a power loss)"
		}
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
	opKeys, err := o.operatorKeys(cfg, stdio, keys)
	if err != nil {
		return err
	}
	// A server's live heap is small and it allocates per turn: without
	// a headroom the collector runs every few turns (docs/performance.md).
	defer gctune.Start(serveGCHeadroom)()
	vaultKeys, err := o.vaultKeys(stdio)
	if err != nil {
		return err
	}
	if len(keys) == 0 && !loopback(o.addr) {
		return usagef("no API keys: set HRNS_API_KEYS=k1,k2, pass --api-keys-file PATH (mode 0600) or set api_keys in the config file (mode 0600) to serve on %s (without keys, hrns serve listens on loopback only)", o.addr)
	}
	if err := o.prepareWorkdir(cfg); err != nil {
		return err
	}
	tokenQuota, err := o.quota.tokenQuota(cfg)
	if err != nil {
		return err
	}
	publicURL, err := checkPublicURL(firstString(o.publicURL, cfg.PublicURL))
	if err != nil {
		return err
	}
	model, modelName, err := buildModel(&runOptions{config: o.config, provider: o.provider, model: o.model, baseURL: o.baseURL}, cfg, &agentFile{}, stdio.getenv)
	if err != nil {
		return err
	}
	tel, err := setupTelemetry(ctx, stdio.getenv, providerName(model), stdio.Err)
	if err != nil {
		return err
	}
	defer tel.close(ctx, stdio.Err)
	log := slog.New(slog.NewTextHandler(stdio.Err, nil))
	opts := &session.Options{
		Environments:      map[string]*loop.Toolset{"web": tools.Web(&tools.WebOptions{Logger: sessionLog(log)})},
		Toolsets:          map[string]*loop.Toolset{},
		Agents:            map[string]*session.AgentConfig{},
		DefaultModel:      modelName,
		MaxSteps:          o.maxSteps,
		Workers:           o.workers,
		MaxActiveSessions: o.maxActive,
		TokenQuota:        tokenQuota,
		AutoApprove:       o.yes,
		Logger:            log,
		Observer:          tel.observer,
		Prices:            pricing.Default().With(cfg.Prices),
		ContextWindows:    cfg.windows(),
		DisableCompaction: cfg.compactionOff(),
		Compaction: &loop.Compaction{
			Threshold: cfg.Compaction.Threshold, Target: cfg.Compaction.Target, KeepTurns: cfg.Compaction.KeepTurns,
		},
		Workspaces: o.workspaces(),
		PublicURL:  publicURL,
	}
	o.reads.setSession(opts)
	opts.Skills = serverSkills(cfg, stdio)
	hookDir, err := o.hookDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(hookDir.temp)
	henv := &hookEnv{workdir: hookDir.path}
	if opts.Permissions, err = cfg.Permissions.policy("", nil, nil, nil); err != nil {
		return usagef("%v", err)
	}
	opts.Hooks = shellHooks(cfg.Hooks, withMode(henv, opts.Permissions))
	if err := o.addBrowser(opts, log); err != nil {
		return err
	}
	if err := o.addWorkstation(opts, log); err != nil {
		return err
	}
	if err := o.addMCPServers(opts, vaultKeys, log); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		ac := &session.AgentConfig{Description: a.Description, Instructions: a.Instructions, Model: a.Model, ReasoningEffort: a.ReasoningEffort, MaxSteps: firstNonZero(a.MaxTurns, a.MaxSteps)}
		if a.Permissions != nil {
			if ac.Permissions, err = a.Permissions.policy("", nil, nil, nil); err != nil {
				return usagef("agent %s: %v", name, err)
			}
		}
		if a.Hooks != nil {
			ac.Hooks = shellHooks(a.Hooks, withMode(henv, firstPerms(ac.Permissions, opts.Permissions)))
		}
		if err := o.addAgent(opts, name, ac, a.Tools, commandNet{on: a.Network, allow: a.NetworkAllow}, "config"+cfg.where()); err != nil {
			return err
		}
	}
	if o.agentsDir != "" {
		if err := o.loadAgents(opts); err != nil {
			return err
		}
	}
	addHCatalog(opts, cfg)
	if err := setCatalog(opts, cfg); err != nil {
		return err
	}
	st, where, err := o.openStore(ctx, stdio.getenv, opts)
	if err != nil {
		return err
	}
	storeClosed := false // by the shutdown, within its deadline
	defer func() {
		if !storeClosed {
			st.Close()
		}
	}()
	vaults, err := setupVaults(ctx, st, vaultKeys, opts, log, stdio.Err)
	if err != nil {
		return err
	}
	m := session.New(st, model, opts)
	if err := reencryptMCPSecrets(ctx, m, vaultKeys, stdio.Err); err != nil {
		return err
	}
	if _, shared := st.(store.Replicas); shared {
		where += ", replica " + m.ReplicaID()
	}
	hooks, err := o.webhooks.service(st, cfg, m.ReplicaID(), log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	// The workers stop with m.Stop, after the HTTP server: a signal
	// cancels ctx first.
	if err := m.Start(context.WithoutCancel(ctx)); err != nil {
		ln.Close()
		return err
	}
	// The schedules' worker: every replica runs one; the store gives each
	// tick to one of them.
	sch := schedule.New(m, st, &schedule.Options{Owner: m.ReplicaID(), Logger: log})
	schedCtx, stopSchedules := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSchedules()
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		sch.Run(schedCtx)
	}()
	hooks.Start()
	// Long-polls and event streams end when the server stops, instead of
	// holding the shutdown for their whole wait.
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srvOpts := &server.Options{APIKeys: keys, OperatorKeys: opKeys, AllowedHosts: o.allowedHosts(ln.Addr(), keys, cfg), CORSOrigins: append(slices.Clone(o.origins), cfg.CORSOrigins...), PublicURL: publicURL, Workspaces: o.workspaces(), Vaults: vaults, Webhooks: hooks, Logger: log, Schedules: sch, Profiles: o.profileLimits, LiveFrame: o.liveFrame, LiveDesktopFrame: o.liveDesktopFrame}
	o.reads.setServer(srvOpts)
	handler, err := server.New(m, srvOpts)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       serveIdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	if len(keys) == 0 {
		fmt.Fprintln(stdio.Err, "hrns serve: no API keys: anyone who can reach this machine's loopback can use the API")
	}
	if len(keys) > 0 && len(opKeys) == 0 {
		fmt.Fprintf(stdio.Err, "hrns serve: no operator key: GET /api/v2/replicas and the details of /healthz answer nobody (set %s=k1,k2, --operator-keys-file PATH or operator_keys in the config file to read them)\n", opKeysEnv)
	}
	fmt.Fprintf(stdio.Err, "hrns serve: listening on http://%s (sessions in %s, model %s)\n", ln.Addr(), where, modelName)
	if len(keys) == 0 {
		fmt.Fprintf(stdio.Err, "hrns serve: the web page is http://%s/ui/ (no key needed: the server has none)\n", ln.Addr())
	} else {
		fmt.Fprintf(stdio.Err, "hrns serve: the web page is http://%s/ui/ (log in with an API key)\n", ln.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	fmt.Fprintln(stdio.Err, "hrns serve: stopping; running sessions stay resumable")
	storeClosed = true
	stopErr := (&serving{srv: srv, cancelRequests: cancelRequests, stopSchedules: stopSchedules, schedDone: schedDone, m: m, hooks: hooks, st: st}).stop(ctx, o.drain)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, stopErr)
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
		cfg := &session.AgentConfig{Description: a.Description, Instructions: a.System, Model: a.Model, ReasoningEffort: a.ReasoningEffort, MaxSteps: a.MaxTurns}
		if err := o.addAgent(opts, name, cfg, a.Tools, commandNet{}, f); err != nil {
			return err
		}
	}
	return nil
}

// commandNet is the network an agent of the config gives its commands:
// on (network = true) and the destinations beyond the public internet it
// lists (network_allow).
type commandNet struct {
	on    bool
	allow []string
}

// commandNetworkOf is the network of an agent's commands: none, or the
// public internet through the proxy ([tools.ShellOptions.PublicNetwork])
// with the destinations of --command-network-allow and the agent's own.
func (o *serveOptions) commandNetworkOf(n commandNet) (on bool, allow func(netip.AddrPort) bool, err error) {
	list := o.commandNetAllow
	if len(n.allow) > 0 {
		list = strings.Join(append([]string{list}, n.allow...), ",")
	}
	if allow, err = browser.ParseAllowList(list); err != nil {
		return false, nil, fmt.Errorf("network_allow: %w", err)
	}
	if len(n.allow) > 0 && !n.on && !o.commandNetwork {
		return false, nil, errors.New("network_allow without network = true (or --command-network)")
	}
	return n.on || o.commandNetwork, allow, nil
}

// addAgent offers an agent by name, with its tools (see
// [serveOptions.agentTools]); network lets its commands reach the public
// internet even without --command-network. source names where the agent
// was defined, for errors.
func (o *serveOptions) addAgent(opts *session.Options, name string, cfg *session.AgentConfig, toolNames []string, network commandNet, source string) error {
	if _, dup := opts.Agents[name]; dup {
		return usagef("agent %q is defined twice (again in %s)", name, source)
	}
	on, allow, err := o.commandNetworkOf(network)
	if err != nil {
		return usagef("agent %s (%s): %v", name, source, err)
	}
	if cfg.ReasoningEffort != "" {
		// The value now; whether the model takes it, when a session
		// names the agent (422 naming the model).
		if _, err := session.ReasoningFor(nil, cfg.Model, cfg.ReasoningEffort); err != nil {
			return usagef("agent %s (%s): reasoning_effort: %v", name, source, err)
		}
	}
	at, err := o.agentTools(toolNames, on, allow)
	if err != nil {
		return usagef("agent %s (%s): %v", name, source, err)
	}
	cfg.Toolsets = append(cfg.Toolsets, at.Environments...)
	if at.Shared != nil {
		key := "agent/" + name
		opts.Toolsets[key] = at.Shared
		cfg.Toolsets = append(cfg.Toolsets, key)
	}
	cfg.Workspace = at.Workspace
	opts.Agents[name] = cfg
	return nil
}

// setCatalog gives agents the further names of the config's catalog; each
// must name an agent, and none may be an agent's own name. A name mapped
// to "" is given to no agent: it takes a name of the built-in catalog
// away (see [addHCatalog]).
func setCatalog(opts *session.Options, cfg *Config) error {
	opts.Catalog = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Catalog)) {
		target := cfg.Catalog[name]
		switch {
		case strings.TrimSpace(name) == "" || strings.ContainsFunc(name, unicode.IsControl):
			return usagef("catalog%s: %q is not a name", cfg.where(), name)
		case target == "":
			continue
		case opts.Agents[target] == nil:
			return usagef("catalog%s: %q names agent %q, which is not defined (agents: %s)", cfg.where(), name, target, strings.Join(slices.Sorted(maps.Keys(opts.Agents)), ", "))
		case opts.Agents[name] != nil:
			return usagef("catalog%s: %q is already the name of an agent", cfg.where(), name)
		}
		opts.Catalog[name] = target
	}
	return nil
}

// addHCatalog offers the agents of the built-in catalog
// ([session.HCatalog]: H Company's published agent names, each a web
// surfer on the server's model), except the names the config's catalog
// maps (to an agent of the operator's, or to "" to offer none) and the
// names of the operator's own agents.
func addHCatalog(opts *session.Options, cfg *Config) {
	for name, a := range session.HCatalog() {
		if _, mapped := cfg.Catalog[name]; mapped || opts.Agents[name] != nil {
			continue
		}
		opts.Agents[name] = a
	}
}

// servedTools are how the tools an agent names reach its sessions.
type servedTools struct {
	// Environments are environment kinds of session.Options the agent
	// uses ("web").
	Environments []string
	// Shared are tools that need no directory (todo_write, and run_code
	// granted only such tools), shared by the agent's sessions; nil if
	// none.
	Shared *loop.Toolset
	// Workspace builds the tools that work in a directory in each
	// session's own (see session.AgentConfig.Workspace); nil if none.
	Workspace func(string) (*loop.Toolset, error)
}

// dirless are the tools that work in no directory.
var dirless = map[string]bool{"web_fetch": true, "todo_write": true, runCodeName: true}

// agentTools resolves the tool names of an agent of hrns serve, as
// [namedTools] does for hrns run: web_fetch (or "web") comes from the web
// environment; the other built-in tools work in --workdir, each session
// in a directory of its own, and only named agents may have them.
// run_code's capabilities are the other tools named (web_fetch then among
// them); each program waits for the sessions API's approval, as any call
// that requires approval, and the calls it makes of capabilities that
// require approval are refused, since a running program cannot wait for a
// decision, unless hrns serve runs with --yes. An unknown name is an
// error. Commands (run_command, and run_code's) have no network unless
// network is set, and then only the public internet, through the proxy
// that enforces internal/netpolicy's address policy, and what allow lets
// through. The agents defined in the config, in --agents files,
// and through the agents API resolve their tools with it.
func (o *serveOptions) agentTools(names []string, network bool, allow func(netip.AddrPort) bool) (*servedTools, error) {
	var st servedTools
	var own []string
	code, needDir := false, false
	for _, t := range names {
		t = strings.TrimSpace(t)
		if t == "web" {
			t = "web_fetch"
		}
		if t == "" || slices.Contains(own, t) {
			continue
		}
		own = append(own, t)
		code = code || t == runCodeName
		needDir = needDir || !dirless[t]
	}
	if !code && slices.Contains(own, "web_fetch") {
		// Not a capability: the web environment's own tool.
		st.Environments = append(st.Environments, "web")
		own = slices.DeleteFunc(own, func(t string) bool { return t == "web_fetch" })
	}
	if len(own) == 0 {
		return &st, nil
	}
	env := func(dir string) *toolEnv {
		e := &toolEnv{Dir: dir, Shell: &tools.ShellOptions{DenyNetwork: !network, PublicNetwork: network, NetworkAllow: allow}, NoCapabilityApproval: "a program run by hrns serve cannot wait for an approval: call the tool directly (the operator can start hrns serve with --yes to allow such calls in programs)"}
		if o.yes {
			e.Capabilities = loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
				if req.Person != "" {
					// --yes is no person: such a call is made by
					// the agent itself, whose approval a person gives.
					return loop.Decision{Verdict: loop.Reject, Reason: "only a person may approve this (" + req.Person + "): call the tool directly, not from a program"}, nil
				}
				return loop.Decision{Verdict: loop.Approve}, nil
			})
		}
		return e
	}
	if !needDir {
		ts, err := namedTools(own, env(""))
		if err != nil {
			return nil, err
		}
		st.Shared = ts
		return &st, nil
	}
	if o.workdir == "" {
		return nil, fmt.Errorf("it uses %s: start hrns serve with --workdir DIR for file and shell tools", strings.Join(own, ", "))
	}
	ws, err := o.workspace(own, env)
	if err != nil {
		return nil, err
	}
	st.Workspace = ws
	return &st, nil
}

// hookFolder is where the shell hooks of hrns serve run: --workdir, or a
// folder of their own made for the server's life (temp names it then).
type hookFolder struct{ path, temp string }

func (o *serveOptions) hookDir() (hookFolder, error) {
	if o.workdir != "" {
		abs, err := filepath.Abs(o.workdir)
		return hookFolder{path: abs}, err
	}
	dir, err := os.MkdirTemp("", "hrns-serve-hooks-")
	return hookFolder{path: dir, temp: dir}, err
}

// withMode returns env for hooks of a policy whose mode is p's.
func withMode(env *hookEnv, p *loop.Permissions) *hookEnv {
	e := *env
	e.mode = p.Mode
	return &e
}

func firstPerms(p ...*loop.Permissions) *loop.Permissions {
	for _, v := range p {
		if v != nil {
			return v
		}
	}
	return nil
}

// checkPublicURL checks --public-url (or public_url): an absolute http or
// https URL, without query or fragment; "" stays "".
func checkPublicURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", usagef("--public-url %q: want the absolute http or https URL clients reach the server at, such as https://hrns.example.com or https://example.com/hrns, without query or fragment", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// serveIdleTimeout is how long hrns serve keeps a client's connection
// open between requests (http.Server's IdleTimeout): longer than the
// idle timeouts of the usual proxies and load balancers (60 s), so that
// the proxy, not hrns, closes an idle connection it pools. Tests
// shorten it.
var serveIdleTimeout = 2 * time.Minute
