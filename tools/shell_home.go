package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
)

// commandHome gives confined commands a home of their own, in place of the
// user's: HOME is a private directory of the workdir, so the toolchains'
// caches (GOCACHE, GOMODCACHE and GOPATH, npm's cache, CARGO_HOME, pip's)
// and their configuration go there, and the user's caches and credentials
// files (~/.gitconfig, ~/.netrc, ~/.npmrc, ~/.ssh, ~/.config,
// ~/.cache/huggingface...) stay out of reach. The user's shared caches are
// offered read-only where that works offline: the Go module cache as a
// GOPROXY file:// source, the Go build cache as the lower layer of an
// overlay (see below), npm's cache when the network is denied. It changes
// o (Env, ReadOnly, ReadWrite), returns the overlays to mount, and is used
// only with the default environment.
//
// The Go build cache: GOCACHE is an overlay whose lower layer is the
// user's build cache, read-only, and whose upper layer is private to the
// workdir's home. A command's build finds the standard library and every
// package the user already built (the first go test of a small package
// costs what it costs outside, not a rebuild of the standard library), and
// what it writes stays in its own layer: the user's cache, which builds
// outside the sandbox trust by key, never holds an entry a command made.
// Where the overlay cannot be mounted (no mount namespace), GOCACHE is
// the private directory alone, as before.
//
// The home is private to one workdir: under the user's cache directory,
// named after a hash of the workdir (in the workdir, .hrns/home, where this
// process has no cache directory), unless ShellOptions.Home says where.
// Nothing but the sandboxed commands of that workdir writes it, and
// nothing outside the sandbox reads it, so what a command leaves there
// (a poisoned module or build cache) can reach only later commands of the
// same workdir, which the command could reach anyway by writing the
// workdir.
func commandHome(o *ShellOptions, workdir string) ([]sandbox.Overlay, error) {
	home := o.Home
	if home == "" {
		if cache, err := os.UserCacheDir(); err == nil {
			sum := sha256.Sum256([]byte(workdir))
			home = filepath.Join(cache, "hrns", "sandbox", hex.EncodeToString(sum[:8]), "home")
		} else {
			// No home and no XDG_CACHE_HOME (a service): in the
			// workdir, which its commands write anyway.
			home = filepath.Join(workdir, ".hrns", "home")
		}
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return nil, err
	}
	// The home in the workdir is made without leaving it: a command may
	// have put a link to a host directory on its way (the sandbox then
	// refuses the grant, but the directories would be made there).
	if within(home, workdir) && home != workdir {
		rel, _ := filepath.Rel(workdir, home)
		err = mkdirIn(workdir, rel)
	} else {
		err = os.MkdirAll(home, 0o700)
	}
	if err != nil {
		return nil, fmt.Errorf("making the commands' home: %w", err)
	}
	o.ReadWrite = append(o.ReadWrite, home)
	set := func(k, v string) {
		o.Env = slices.DeleteFunc(o.Env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
		o.Env = append(o.Env, k+"="+v)
	}
	userHome, _ := os.UserHomeDir()
	set("HOME", home)

	// Go: a private GOPATH and module cache under the new home; the
	// shared module cache's downloads, read-only, as the first proxy;
	// the shared build cache under a private overlay. (The shared build
	// cache itself is never writable: its entries are trusted by key,
	// and one written by a command would be linked into later builds
	// outside the sandbox.)
	var overlays []sandbox.Overlay
	goCache := filepath.Join(home, ".cache", "go-build")
	// Inside the home, which the commands write: made without leaving
	// it.
	if err := mkdirIn(home, filepath.Join(".cache", "go-build")); err != nil {
		return nil, fmt.Errorf("making the commands' Go build cache: %w", err)
	}
	set("GOCACHE", goCache)
	if shared := sharedGoBuildCache(); shared != "" && isDir(shared) && !within(home, shared) && !within(shared, home) {
		layer := filepath.Join(home, ".cache", "hrns-overlay", "go-build")
		upper, work := filepath.Join(layer, "upper"), filepath.Join(layer, "work")
		if mkdirIn(home, filepath.Join(".cache", "hrns-overlay", "go-build", "upper")) == nil && mkdirIn(home, filepath.Join(".cache", "hrns-overlay", "go-build", "work")) == nil {
			overlays = append(overlays, sandbox.Overlay{Lower: shared, Upper: upper, Work: work, Target: goCache})
		}
	}
	if dl := filepath.Join(sharedGoModCache(userHome), "cache", "download"); isDir(dl) {
		o.ReadOnly = append(o.ReadOnly, dl)
		upstream := os.Getenv("GOPROXY")
		if upstream == "" {
			upstream = "https://proxy.golang.org,direct"
		}
		if o.DenyNetwork {
			upstream = "off"
		}
		set("GOPROXY", "file://"+dl+","+upstream)
	}
	for _, k := range []string{"GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOTOOLCHAIN"} {
		if v, ok := os.LookupEnv(k); ok {
			set(k, v)
		}
	}

	// npm: with the network denied, the shared cache read-only (npm ci
	// --offline reads it without writing); with the network, a private
	// one under the home, which npm fills. The log and the update check
	// stay out of the shared cache.
	if userHome != "" && o.DenyNetwork {
		if c := filepath.Join(userHome, ".npm", "_cacache"); isDir(c) {
			o.ReadOnly = append(o.ReadOnly, c)
			set("npm_config_cache", filepath.Dir(c))
			set("npm_config_offline", "true")
		}
	}
	set("npm_config_logs_dir", filepath.Join(home, ".npm", "_logs"))
	set("npm_config_update_notifier", "false")

	// Rust: the toolchains of rustup read-only; CARGO_HOME (registry,
	// credentials) is the private home's.
	rustup := os.Getenv("RUSTUP_HOME")
	if rustup == "" && userHome != "" {
		rustup = filepath.Join(userHome, ".rustup")
	}
	if rustup != "" && isDir(rustup) {
		o.ReadOnly = append(o.ReadOnly, rustup)
		set("RUSTUP_HOME", rustup)
	}
	if o.DenyNetwork {
		set("CARGO_NET_OFFLINE", "true")
	}

	// Programs installed in the user's home and on the PATH (~/go/bin,
	// ~/.cargo/bin), read-only: the directory of programs only, not the
	// rest of the home.
	for _, kv := range o.Env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok && userHome != "" {
			for _, d := range filepath.SplitList(path) {
				if d != "" && filepath.IsAbs(d) && within(d, userHome) && isDir(d) {
					o.ReadOnly = append(o.ReadOnly, d)
				}
			}
		}
	}

	// git: the author's name and address, not the rest of the user's
	// configuration (credential helpers, extraheader tokens).
	for k, vars := range map[string][]string{"user.name": {"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"}, "user.email": {"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"}} {
		if v := gitConfig(k); v != "" {
			for _, e := range vars {
				set(e, v)
			}
		}
	}
	return overlays, nil
}

// sharedGoBuildCache is the user's Go build cache, as the go command finds
// it from the environment ("" when there is none, or it is off).
func sharedGoBuildCache() string {
	if c := os.Getenv("GOCACHE"); c != "" {
		if c == "off" || !filepath.IsAbs(c) {
			return ""
		}
		return c
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "go-build")
}

// sharedGoModCache is the user's Go module cache, as the go command finds
// it from the environment.
func sharedGoModCache(userHome string) string {
	if c := os.Getenv("GOMODCACHE"); c != "" {
		return c
	}
	if gp := filepath.SplitList(os.Getenv("GOPATH")); len(gp) > 0 && gp[0] != "" {
		return filepath.Join(gp[0], "pkg", "mod")
	}
	if userHome == "" {
		return ""
	}
	return filepath.Join(userHome, "go", "pkg", "mod")
}

// gitConfig reads one value of the user's git configuration, or "".
func gitConfig(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "config", "--get", key)
	cmd.Dir = "/" // the user's and the system's configuration, no repository's
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// mkdirIn makes base/rel and its missing parents (mode 0700) without
// leaving base, whatever links a sandboxed command left below it.
func mkdirIn(base, rel string) error {
	r, err := os.OpenRoot(base)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.MkdirAll(rel, 0o700)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
