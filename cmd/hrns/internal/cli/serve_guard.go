package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/hrns-dev/hrns/loop"
)

// What hrns serve does so that one tenant cannot take over another's
// sessions: keys never on the command line, the store out of the agents'
// reach, a directory of its own for each session, and the server's Host
// and Origin rules (docs/serve.md, "Security").

// keysEnv is the variable holding the accepted API keys; opKeysEnv the
// one holding the operator keys.
const (
	keysEnv   = "HRNS_API_KEYS"
	opKeysEnv = "HRNS_OPERATOR_KEYS"
)

// keys returns the accepted API keys: HRNS_API_KEYS, --api-keys-file and
// the config file's api_keys. --api-key is refused: the command line of
// a process is readable by every process of the machine
// (/proc/PID/cmdline, ps), the commands the agents run included.
func (o *serveOptions) keys(cfg *Config, stdio *IO) ([]string, error) {
	if o.apiKeyArg {
		return nil, usagef("--api-key is refused: a key on the command line can be read by every process of this machine (ps, /proc/PID/cmdline), the commands agents run included; set %s=k1,k2, pass --api-keys-file PATH (one key a line, mode 0600), or set api_keys in the config file (mode 0600)", keysEnv)
	}
	keys := splitList(stdio.getenv(keysEnv))
	if stdio.Getenv == nil {
		// Whatever this process starts inherits nothing of it (the
		// tools pass a small environment of their own anyway).
		os.Unsetenv(keysEnv)
	}
	if o.keysFile != "" {
		fk, err := readKeysFile(o.keysFile)
		if err != nil {
			return nil, usagef("--api-keys-file: %v", err)
		}
		keys = append(keys, fk...)
	}
	ck, err := configKeys("api_keys", cfg.APIKeys)
	if err != nil {
		return nil, err
	}
	return append(keys, ck...), nil
}

// operatorKeys returns the operator keys: HRNS_OPERATOR_KEYS (removed
// from the environment once read, as HRNS_API_KEYS is),
// --operator-keys-file (checked as --api-keys-file is) and the config
// file's operator_keys. They open the operator's routes and nothing
// else; one that is also among the API keys apiKeys is a usage error
// (which the key is would depend on the route), which names neither.
func (o *serveOptions) operatorKeys(cfg *Config, stdio *IO, apiKeys []string) ([]string, error) {
	keys := splitList(stdio.getenv(opKeysEnv))
	if stdio.Getenv == nil {
		os.Unsetenv(opKeysEnv)
	}
	if o.opKeysFile != "" {
		fk, err := readKeysFile(o.opKeysFile)
		if err != nil {
			return nil, usagef("--operator-keys-file: %v", err)
		}
		keys = append(keys, fk...)
	}
	ck, err := configKeys("operator_keys", cfg.OperatorKeys)
	if err != nil {
		return nil, err
	}
	keys = append(keys, ck...)
	for _, k := range keys {
		if slices.Contains(apiKeys, k) {
			return nil, usagef("a key is both an API key and an operator key: an operator key reads the replicas and nothing else, and a tenant's key must not read them; give the operator a key of its own (%s, --operator-keys-file or operator_keys) that is not among the API keys (%s, --api-keys-file or api_keys)", opKeysEnv, keysEnv)
		}
	}
	return keys, nil
}

// configKeys returns the keys of the config file's list name, trimmed
// as the server trims the keys it is given; an empty one is an error
// (the web page's login would take an empty key for it).
func configKeys(name string, keys []string) ([]string, error) {
	out := make([]string, 0, len(keys))
	for i, k := range keys {
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, usagef("config: %s[%d] is empty", name, i)
		}
		out = append(out, k)
	}
	return out, nil
}

// readKeysFile reads a file of keys, one a line; blank lines and lines
// starting with # are skipped. It refuses a file that is not a regular
// file or that its group or others may read or write.
func readKeysFile(path string) (keys []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys = append(keys, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key", path)
	}
	return keys, nil
}

// prepareWorkdir checks --workdir: it must be a directory, and the SQLite
// store (its file, journal, WAL, shared memory and lock) must not lie in
// it, where an agent's tools could read or rewrite other tenants'
// sessions; nor may the keys file or a config file holding keys. Paths are compared
// after resolving symbolic links. It creates DIR/sessions (mode 0700),
// which holds the sessions' own directories.
func (o *serveOptions) prepareWorkdir(cfg *Config) error {
	if o.workdir == "" {
		return nil
	}
	wd, err := realPath(o.workdir)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(wd); err == nil && !fi.IsDir() {
			err = fmt.Errorf("not a directory")
		}
	}
	if err != nil {
		return usagef("--workdir %s: %v", o.workdir, err)
	}
	o.workdirReal = wd
	if kind, db, _ := o.store(); kind == "sqlite" {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal", ".lock"} {
			p, err := realPath(db + suffix)
			if err != nil {
				return usagef("--db %s%s: %v", db, suffix, err)
			}
			if within(wd, p) {
				return usagef("the store %s (%s) is inside --workdir %s: the agents' tools could read and rewrite every session in it; put the database outside the workdir (--db sqlite:/var/lib/hrns/hrns.db) or choose another --workdir", db+suffix, p, o.workdir)
			}
		}
	}
	secrets := []struct{ what, path string }{{"--api-keys-file", o.keysFile}, {"--operator-keys-file", o.opKeysFile}, {"--vault-key-file", o.vaultKeyFile}}
	if cfg.holdsKeys() {
		secrets = append(secrets, struct{ what, path string }{"the config file", cfg.path})
	}
	for _, f := range secrets {
		if f.path == "" {
			continue
		}
		if p, err := realPath(f.path); err == nil && within(wd, p) {
			return usagef("%s %s is inside --workdir %s, where the agents' tools could read it; move it out", f.what, f.path, o.workdir)
		}
	}
	if err := os.Mkdir(filepath.Join(wd, "sessions"), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("--workdir: %w", err)
	}
	if fi, err := os.Lstat(filepath.Join(wd, "sessions")); err != nil || !fi.IsDir() {
		return usagef("--workdir %s: sessions is not a directory", o.workdir)
	}
	return nil
}

// realPath returns the absolute path of p with every symbolic link
// resolved, also when p, or the end of it, does not exist yet (as a store
// SQLite will create): the missing part is kept as it is, below the
// resolved part that exists, and a dangling link is followed to where
// it points.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for range 64 {
		r, err := filepath.EvalSymlinks(abs)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, lerr := os.Lstat(abs); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(abs)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(abs), target)
			}
			abs = target
			continue
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return filepath.Join(abs, rest), nil
		}
		rest = filepath.Join(filepath.Base(abs), rest)
		abs = parent
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", p)
}

// within reports whether p is dir or lies below it; both are clean,
// absolute paths.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// workspaceName is the form of the names the session manager gives
// sessions' workspaces.
var workspaceName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })

// workspace returns what builds the tools names of one session
// in its own directory, DIR/sessions/NAME (mode 0700), created when the
// session is: no session sees another's files. For the empty name (a
// request being validated) it returns the tools rooted in a directory
// that no longer exists, so that refused requests leave nothing behind.
func (o *serveOptions) workspace(names []string, env func(dir string) *toolEnv) (func(string) (*loop.Toolset, error), error) {
	tmp, err := os.MkdirTemp("", "hrns-tool-names-")
	if err != nil {
		return nil, err
	}
	probe, err := namedTools(names, env(tmp))
	if rerr := os.Remove(tmp); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	return func(name string) (*loop.Toolset, error) {
		if name == "" {
			return probe, nil
		}
		if !workspaceName().MatchString(name) {
			return nil, fmt.Errorf("workspace name %q is not 32 hex digits", name)
		}
		dir := filepath.Join(o.workdirReal, "sessions", name)
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("the session's directory %s is not a directory", dir)
		}
		return namedTools(names, env(dir))
	}, nil
}

// allowedHosts returns the Host headers the API answers at addr, where
// it listens: loopback's names at its port and the configured hosts. A
// server with keys that listens beyond loopback and names no host
// answers any Host (nil): its keys are the defence, and it cannot know
// the names it is reached by.
func (o *serveOptions) allowedHosts(addr net.Addr, keys []string, cfg *Config) []string {
	extra := append(slices.Clone([]string(o.hosts)), cfg.AllowedHosts...)
	if len(keys) > 0 && !loopback(o.addr) && len(extra) == 0 {
		return nil
	}
	host, port, _ := net.SplitHostPort(addr.String())
	hosts := []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return append(hosts, extra...)
}
