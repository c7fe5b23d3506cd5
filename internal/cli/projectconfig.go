package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
)

// projectConfigNames are the per-project config files, looked for in
// .hrns/ of the workdir and of its parents up to the repository's root.
var projectConfigNames = []string{"config.toml", "config.yaml", "config.yml"}

// mergeProject merges the project's .hrns/config.toml (or .yaml) into the
// user's config: its provider, model, tools, max_turns and prices win.
//
// A project file comes with the repository, that is from whoever wrote the
// repository: it may choose among what the user configured, but not add
// endpoints, keys, headers, MCP servers or skill folders, nor set what hrns
// serve reads. A repository cloned from a stranger cannot send the user's
// key to another server or start a program with it.
func (c *Config) mergeProject(workdir string) error {
	path, err := findProjectConfig(workdir)
	if path == "" || err != nil {
		return err
	}
	data, err := readBounded(path, 1<<20)
	if err != nil {
		return fmt.Errorf("project config %s: %w", path, err)
	}
	p, err := parseConfig(path, []byte(data))
	if err != nil {
		return err
	}
	var refused string
	switch {
	case len(p.Providers) > 0:
		refused = "providers"
	case len(p.MCP.Servers) > 0:
		refused = "mcp"
	case len(p.Skills) > 0:
		refused = "skills"
	case len(p.APIKeys) > 0:
		refused = "api_keys"
	case len(p.AllowedHosts) > 0:
		refused = "allowed_hosts"
	case len(p.CORSOrigins) > 0:
		refused = "cors_origins"
	case p.PublicURL != "":
		refused = "public_url"
	case len(p.Agents) > 0:
		refused = "agents"
	case len(p.Catalog) > 0:
		refused = "catalog"
	case (p.Webhooks.AllowPrivate || p.Webhooks.Allow != nil || p.Webhooks.Timeout != "" || p.Webhooks.MaxAttempts != 0):
		refused = "webhooks" // addresses deliveries may reach
	case len(p.Hooks) > 0:
		refused = "hooks" // programs to start
	case p.Permissions.Mode != "" || len(p.Permissions.Allow) > 0 || len(p.Permissions.Deny) > 0 || len(p.Permissions.Ask) > 0:
		refused = "permissions" // a repository may not allow itself more
	}
	if refused != "" {
		return fmt.Errorf("project config %s: %q may be set only in your own config file (%s): a repository may not choose endpoints, keys, programs to start or permissions",
			path, refused, firstString(c.path, "~/.config/hrns/config.toml"))
	}
	if p.Provider != "" {
		c.Provider = p.Provider
	}
	if p.Model != "" {
		c.Model = p.Model
	}
	if p.Tools != nil {
		c.Tools = p.Tools
	}
	if p.MaxTurns != 0 {
		c.MaxTurns = p.MaxTurns
	}
	if len(p.Prices) > 0 {
		if c.Prices == nil {
			c.Prices = maps.Clone(p.Prices)
		} else {
			maps.Copy(c.Prices, p.Prices)
		}
	}
	c.project = path
	return nil
}

// findProjectConfig returns the nearest .hrns/config.* from workdir up to
// the repository's root (workdir alone outside a repository), or "".
func findProjectConfig(workdir string) (string, error) {
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return "", err
	}
	var dirs []string
	for d := abs; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			break
		}
		if filepath.Dir(d) == d {
			dirs = dirs[:1]
			break
		}
	}
	for _, d := range dirs {
		for _, n := range projectConfigNames {
			p := filepath.Join(d, ".hrns", n)
			_, err := os.Stat(p)
			if err == nil {
				return p, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("project config %s: %w", p, err)
			}
		}
	}
	return "", nil
}
