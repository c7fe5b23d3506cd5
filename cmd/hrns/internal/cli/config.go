package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/pricing"
)

// Config is the configuration file: ~/.config/hrns/config.toml (or
// config.yaml), or the file named by --config or HRNS_CONFIG.
//
//	provider = "local"              # default provider (a name below, or openai / openai-responses / anthropic / gemini)
//	model = "qwen3:8b"              # default model
//	tools = ["read_file", "list_files", "run_command"]
//
//	[providers.local]
//	kind = "openai"                 # wire format: openai, openai-responses, anthropic or gemini
//	base_url = "http://localhost:11434/v1"
//	api_key_env = "OLLAMA_KEY"      # read the key from this variable
//	model = "qwen3:8b"
//	headers = { "X-Team" = "core" }
//
// A file that holds an api_key must not be readable by others (mode 0600).
type Config struct {
	Provider  string              `toml:"provider" yaml:"provider"`
	Model     string              `toml:"model" yaml:"model"`
	Tools     []string            `toml:"tools" yaml:"tools"`
	MaxTurns  int                 `toml:"max_turns" yaml:"max_turns"`
	Skills    []string            `toml:"skills" yaml:"skills"`
	Providers map[string]Provider `toml:"providers" yaml:"providers"`
	MCP       MCPConfig           `toml:"mcp" yaml:"mcp"`
	// APIKeys are the keys hrns serve accepts, besides HRNS_API_KEYS and
	// --api-keys-file. A file holding them must have mode 0600.
	APIKeys []string `toml:"api_keys" yaml:"api_keys"`
	// OperatorKeys are the operator keys of hrns serve, besides
	// HRNS_OPERATOR_KEYS and --operator-keys-file: they read the
	// operator's routes (the replicas, /healthz's details) and nothing
	// else. A file holding them must have mode 0600.
	OperatorKeys []string `toml:"operator_keys" yaml:"operator_keys"`
	// AllowedHosts are Host headers hrns serve answers besides
	// loopback's (--allowed-host).
	AllowedHosts []string `toml:"allowed_hosts" yaml:"allowed_hosts"`
	// CORSOrigins are origins whose web pages may call hrns serve
	// (--cors-origin).
	CORSOrigins []string `toml:"cors_origins" yaml:"cors_origins"`
	// PublicURL is hrns serve's address as its clients reach it, which
	// share URLs are made from (--public-url).
	PublicURL string `toml:"public_url" yaml:"public_url"`
	// Agents are the agents hrns serve offers by name.
	Agents map[string]AgentConfig `toml:"agents" yaml:"agents"`
	// Catalog gives agents of hrns serve more names, such as the
	// catalog names of the Agents API ("h/web-surfer-flash"): each maps
	// to the name of an agent of Agents, of --agents or of the built-in
	// catalog (session.HCatalog). A name of the built-in catalog mapped
	// here runs the agent it maps to instead of the built-in web surfer;
	// mapped to "", it is not offered.
	//
	//	[catalog]
	//	"h/web-surfer-flash" = "repo-helper"
	//	"h/web" = ""
	Catalog map[string]string `toml:"catalog" yaml:"catalog"`
	// Permissions is the permission policy of hrns run (and the default
	// of hrns serve's agents).
	Permissions PermissionsConfig `toml:"permissions" yaml:"permissions"`
	// Hooks are shell commands run at points of every run, by event
	// (pre_tool, post_tool, ...; Claude Code's names work too).
	Hooks map[string][]HookConfig `toml:"hooks" yaml:"hooks"`
	// Prices override or add to the built-in price table (of the chat,
	// hrns run and hrns serve's session metrics), per model, in US
	// dollars per million tokens: [prices."my-model"] input = 1.0,
	// cached_input = 0.1, cache_write = 1.25, output = 4.0.
	Prices pricing.Table `toml:"prices" yaml:"prices"`
	// ContextWindows override or add to the built-in context windows
	// (pricing.DefaultWindows), per model, in tokens:
	// [context_windows] "my-model" = 32768. Compaction keeps the
	// requests of hrns run, the chat and hrns serve within them.
	ContextWindows map[string]int `toml:"context_windows" yaml:"context_windows"`
	// Compaction tunes automatic compaction (compaction.go).
	Compaction CompactionConfig `toml:"compaction" yaml:"compaction"`
	// Quota is hrns serve's token quota per API key (serve_quota.go).
	Quota QuotaConfig `toml:"quota" yaml:"quota"`
	// Webhooks is how hrns serve delivers webhooks (serve_webhooks.go).
	Webhooks WebhooksConfig `toml:"webhooks" yaml:"webhooks"`

	path    string // where it was read from, for messages
	project string // the project's .hrns/config.toml merged into it, if any
	// projectHash is the SHA-256 of the project's file, in hex.
	projectHash string
	// projectEnables are the tools the project's file selects beyond
	// hrns's defaults and the user's own: offered only once the person
	// agreed (trustProject).
	projectEnables []string
	// claude is what the project's Claude Code files (.claude/settings.json,
	// .mcp.json) ask for beyond restrictions: applied once the person
	// agreed (trustClaude).
	claude *claudeProject
}

// AgentConfig defines an agent that callers of hrns serve can name.
//
//	[agents.reviewer]
//	description = "Reviews a diff"
//	instructions = "You review Go code. Be terse."
//	model = "gpt-4.1"
//	tools = ["read_file", "list_files", "web_fetch"]
//	max_steps = 20
type AgentConfig struct {
	Description  string `toml:"description" yaml:"description"`
	Instructions string `toml:"instructions" yaml:"instructions"`
	Model        string `toml:"model" yaml:"model"`
	// ReasoningEffort is the agent's reasoning_effort in hrns serve:
	// disabled, low, medium, high or xhigh.
	ReasoningEffort string   `toml:"reasoning_effort" yaml:"reasoning_effort"`
	Tools           []string `toml:"tools" yaml:"tools"`
	MaxSteps        int      `toml:"max_steps" yaml:"max_steps"`
	// MaxTurns is max_steps under the name agent files and the rest of
	// the config use; give one or the other.
	MaxTurns int `toml:"max_turns" yaml:"max_turns"`
	// Permissions and Hooks, when set, replace the config's top-level
	// ones for this agent's sessions.
	Permissions *PermissionsConfig      `toml:"permissions" yaml:"permissions"`
	Hooks       map[string][]HookConfig `toml:"hooks" yaml:"hooks"`
	// Network lets the agent's commands (run_command, and run_code's) use
	// the public internet in hrns serve, through the proxy that refuses
	// loopback, private and the machine's own addresses, where by default
	// they have no network (see --command-network). NetworkAllow lists
	// destinations beyond the public internet they may reach (IPs,
	// prefixes, IP:port), besides --command-network-allow.
	Network      bool     `toml:"network" yaml:"network"`
	NetworkAllow []string `toml:"network_allow" yaml:"network_allow"`
}

// PermissionsConfig is the permission policy of the config file:
//
//	[permissions]
//	mode = "acceptEdits"            # default, acceptEdits, plan or bypassPermissions
//	allow = ["run_command(git status:*)", "run_command(go test:*)"]
//	ask = ["run_command(git push:*)"]    # always asked, whatever the mode (but bypassPermissions)
//	deny = ["run_command(rm:*)", "write_file(**/.env)", "web_fetch"]
//
// See docs/cli.md for the rules' syntax and the order of evaluation.
type PermissionsConfig struct {
	Mode  string   `toml:"mode" yaml:"mode"`
	Allow []string `toml:"allow" yaml:"allow"`
	Ask   []string `toml:"ask" yaml:"ask"`
	Deny  []string `toml:"deny" yaml:"deny"`
}

// policy builds the loop's policy from c, with the mode and rules of the
// flags: a mode given by flag replaces c's; rules add up.
func (c PermissionsConfig) policy(mode string, allow, deny, ask []string) (*loop.Permissions, error) {
	m, err := loop.ParsePermissionMode(firstString(mode, c.Mode))
	if err != nil {
		return nil, err
	}
	p := &loop.Permissions{Mode: m}
	for _, s := range slices.Concat(c.Allow, allow) {
		r, err := loop.ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("allow: %w", err)
		}
		p.Allow = append(p.Allow, r)
	}
	for _, s := range slices.Concat(c.Deny, deny) {
		r, err := loop.ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("deny: %w", err)
		}
		p.Deny = append(p.Deny, r)
	}
	for _, s := range slices.Concat(c.Ask, ask) {
		r, err := loop.ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("ask: %w", err)
		}
		p.Ask = append(p.Ask, r)
	}
	return p, nil
}

// Provider configures one model endpoint.
type Provider struct {
	// Kind is the wire format: "openai" (the default, Chat Completions),
	// "openai-responses" (OpenAI's Responses API), "anthropic" or "gemini"
	// (the Gemini API).
	Kind      string            `toml:"kind" yaml:"kind"`
	BaseURL   string            `toml:"base_url" yaml:"base_url"`
	APIKey    string            `toml:"api_key" yaml:"api_key"`
	APIKeyEnv string            `toml:"api_key_env" yaml:"api_key_env"`
	Model     string            `toml:"model" yaml:"model"`
	Headers   map[string]string `toml:"headers" yaml:"headers"`
}

// configPaths lists where the config file is looked for, in order.
func configPaths(env func(string) string) []string {
	if p := env("HRNS_CONFIG"); p != "" {
		return []string{p}
	}
	dir := env("XDG_CONFIG_HOME")
	if dir == "" {
		home := env("HOME")
		if home == "" {
			return nil
		}
		dir = filepath.Join(home, ".config")
	}
	return []string{filepath.Join(dir, "hrns", "config.toml"), filepath.Join(dir, "hrns", "config.yaml"), filepath.Join(dir, "hrns", "config.yml")}
}

// loadConfig reads the config file at path, or the first of the default
// paths that exists. No file is not an error: the zero Config is returned.
func loadConfig(path string, env func(string) string) (*Config, error) {
	explicit := path != ""
	paths := []string{path}
	if !explicit {
		paths = configPaths(env)
		explicit = env("HRNS_CONFIG") != ""
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) && !explicit {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		cfg, err := parseConfig(p, data)
		if err != nil {
			return nil, err
		}
		if err := cfg.checkMode(); err != nil {
			return nil, err
		}
		return cfg, nil
	}
	return &Config{}, nil
}

func parseConfig(path string, data []byte) (*Config, error) {
	cfg := &Config{path: path}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".yaml", ".yml":
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	default:
		md, err := toml.Decode(string(data), cfg)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		if un := md.Undecoded(); len(un) > 0 {
			return nil, fmt.Errorf("config %s: unknown key %q", path, un[0].String())
		}
	}
	if _, err := cfg.Permissions.policy("", nil, nil, nil); err != nil {
		return nil, fmt.Errorf("config %s: permissions: %w", path, err)
	}
	if err := checkHooks(cfg.Hooks); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	for name, a := range cfg.Agents {
		if a.Permissions != nil {
			if _, err := a.Permissions.policy("", nil, nil, nil); err != nil {
				return nil, fmt.Errorf("config %s: agents.%s.permissions: %w", path, name, err)
			}
		}
		if err := checkHooks(a.Hooks); err != nil {
			return nil, fmt.Errorf("config %s: agents.%s: %w", path, name, err)
		}
		if a.MaxTurns != 0 && a.MaxSteps != 0 {
			return nil, fmt.Errorf("config %s: agent %q: max_turns and max_steps are the same limit: give one", path, name)
		}
	}
	if err := cfg.Prices.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: prices: %w", path, err)
	}
	if err := pricing.Tokens(cfg.ContextWindows).Validate(); err != nil {
		return nil, fmt.Errorf("config %s: context_windows: %w", path, err)
	}
	if err := cfg.Compaction.validate(); err != nil {
		return nil, fmt.Errorf("config %s: compaction: %w", path, err)
	}
	for name, p := range cfg.Providers {
		switch p.Kind {
		case "", "openai", "openai-responses", "anthropic", "gemini":
		default:
			return nil, fmt.Errorf("config %s: provider %q: kind %q is not openai, openai-responses, anthropic or gemini", path, name, p.Kind)
		}
	}
	return cfg, nil
}

// holdsKeys reports whether the file holds a key: an API key of hrns
// serve or of a provider.
func (c *Config) holdsKeys() bool {
	hasKey := len(c.APIKeys) > 0 || len(c.OperatorKeys) > 0
	for _, p := range c.Providers {
		hasKey = hasKey || p.APIKey != ""
	}
	return hasKey
}

// checkMode refuses a file holding a key that others can read.
func (c *Config) checkMode() error {
	if !c.holdsKeys() {
		return nil
	}
	fi, err := os.Stat(c.path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("config %s holds keys but is readable by others (mode %v): run chmod 600 %s, or use api_key_env", c.path, fi.Mode().Perm(), c.path)
	}
	return nil
}
