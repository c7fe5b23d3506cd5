package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"

	"github.com/hrns-dev/hrns/internal/tui"
)

// Config is the configuration file: ~/.config/hrns/config.toml (or
// config.yaml), or the file named by --config or HRNS_CONFIG.
//
//	provider = "local"              # default provider (a name below, or openai / openai-responses / anthropic)
//	model = "qwen3:8b"              # default model
//	tools = ["read_file", "list_files", "run_command"]
//
//	[providers.local]
//	kind = "openai"                 # wire format: openai, openai-responses or anthropic
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
	// AllowedHosts are Host headers hrns serve answers besides
	// loopback's (--allowed-host).
	AllowedHosts []string `toml:"allowed_hosts" yaml:"allowed_hosts"`
	// CORSOrigins are origins whose web pages may call hrns serve
	// (--cors-origin).
	CORSOrigins []string `toml:"cors_origins" yaml:"cors_origins"`
	// Agents are the agents hrns serve offers by name.
	Agents map[string]AgentConfig `toml:"agents" yaml:"agents"`
	// Prices override or add to the chat's price table, per model, in US
	// dollars per million tokens: [prices."my-model"] input = 1.0,
	// cached_input = 0.1, cache_write = 1.25, output = 4.0.
	Prices map[string]tui.Price `toml:"prices" yaml:"prices"`

	path    string // where it was read from, for messages
	project string // the project's .hrns/config.toml merged into it, if any
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
	Description  string   `toml:"description" yaml:"description"`
	Instructions string   `toml:"instructions" yaml:"instructions"`
	Model        string   `toml:"model" yaml:"model"`
	Tools        []string `toml:"tools" yaml:"tools"`
	MaxSteps     int      `toml:"max_steps" yaml:"max_steps"`
	// MaxTurns is max_steps under the name agent files and the rest of
	// the config use; give one or the other.
	MaxTurns int `toml:"max_turns" yaml:"max_turns"`
}

// Provider configures one model endpoint.
type Provider struct {
	// Kind is the wire format: "openai" (the default, Chat Completions),
	// "openai-responses" (OpenAI's Responses API) or "anthropic".
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
	for name, a := range cfg.Agents {
		if a.MaxTurns != 0 && a.MaxSteps != 0 {
			return nil, fmt.Errorf("config %s: agent %q: max_turns and max_steps are the same limit: give one", path, name)
		}
	}
	for name, p := range cfg.Providers {
		switch p.Kind {
		case "", "openai", "openai-responses", "anthropic":
		default:
			return nil, fmt.Errorf("config %s: provider %q: kind %q is not openai, openai-responses or anthropic", path, name, p.Kind)
		}
	}
	return cfg, nil
}

// holdsKeys reports whether the file holds a key: an API key of hrns
// serve or of a provider.
func (c *Config) holdsKeys() bool {
	hasKey := len(c.APIKeys) > 0
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
