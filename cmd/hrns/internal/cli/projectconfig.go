package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
//
// Tools beyond those the user would have anyway (hrns's defaults and the
// user's own tools) are noted in c.projectEnables: the person must agree
// to them once ([Config.trustProject]) before they are offered.
func (c *Config) mergeProject(workdir string) error {
	if err := c.mergeHrnsProject(workdir); err != nil {
		return err
	}
	cp, err := c.readClaudeProject(workdir)
	if err != nil {
		return usagef("Claude Code project settings: %v", err)
	}
	c.claude = cp
	return nil
}

// mergeHrnsProject merges the project's .hrns/config.toml.
func (c *Config) mergeHrnsProject(workdir string) error {
	top, rel, err := findProjectConfig(workdir)
	if rel == "" || err != nil {
		return err
	}
	path := filepath.Join(top, rel)
	root, err := os.OpenRoot(top)
	if err != nil {
		return fmt.Errorf("project config %s: %w", path, err)
	}
	data, err := readInRoot(root, rel, 1<<20)
	root.Close()
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
	case len(p.OperatorKeys) > 0:
		refused = "operator_keys"
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
		c.projectEnables = toolsBeyond(p.Tools, c.Tools)
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
	if len(p.ContextWindows) > 0 {
		if c.ContextWindows == nil {
			c.ContextWindows = maps.Clone(p.ContextWindows)
		} else {
			maps.Copy(c.ContextWindows, p.ContextWindows)
		}
	}
	c.Compaction.merge(p.Compaction)
	c.project = path
	sum := sha256.Sum256([]byte(data))
	c.projectHash = hex.EncodeToString(sum[:])
	return nil
}

// toolsBeyond returns the tools of names (a project's selection) that are
// neither among hrns's defaults nor among the user's own selection:
// "all" stands for every tool.
func toolsBeyond(names, users []string) []string {
	if len(names) == 1 && strings.TrimSpace(names[0]) == "all" {
		names = allToolNames()
	}
	if len(users) == 1 && strings.TrimSpace(users[0]) == "all" {
		return nil
	}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || n == "none" || slices.Contains(defaultTools, n) || slices.Contains(users, n) || slices.Contains(out, n) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// findProjectConfig finds the nearest .hrns/config.* from workdir up to
// the repository's root (workdir alone outside a repository): the
// directory it is read inside (that root) and its path there; rel is ""
// when there is none.
func findProjectConfig(workdir string) (top, rel string, err error) {
	dirs, err := projectDirs(workdir)
	if err != nil {
		return "", "", err
	}
	top = dirs[len(dirs)-1]
	for _, d := range dirs {
		for _, n := range projectConfigNames {
			p := filepath.Join(d, ".hrns", n)
			_, err := os.Lstat(p)
			if err == nil {
				rel, err := filepath.Rel(top, p)
				return top, rel, err
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return "", "", fmt.Errorf("project config %s: %w", p, err)
			}
		}
	}
	return top, "", nil
}

// projectDirs returns the directories a project's files are looked for
// in, nearest first: workdir (absolute) and its parents up to the
// repository's root, the directory holding .git (workdir alone outside a
// repository). The last is the directory they are read inside.
func projectDirs(workdir string) ([]string, error) {
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for d := abs; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return dirs, nil
		}
		if filepath.Dir(d) == d {
			return dirs[:1], nil
		}
	}
}
