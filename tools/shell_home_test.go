//go:build linux

package tools_test

import (
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/tools"
)

// TestSandboxHome (issue 13, break 2): with the default environment and
// the network denied, a command reads none of the user's credentials files
// and writes none of the user's shared caches, and yet go build and go
// test (with a module from the shared module cache), npm ci (from the
// shared npm cache) and cargo build work offline, from a home of the
// workdir's own.
func TestSandboxHome(t *testing.T) {
	needLandlock(t)
	gomodcache := goEnv(t, "GOMODCACHE")
	if _, err := os.Stat(filepath.Join(gomodcache, "cache/download/github.com/google/go-cmp/@v/v0.7.0.zip")); err != nil {
		t.Skipf("go-cmp v0.7.0 is not in the module cache %s: %v", gomodcache, err)
	}
	// rustup's toolchains, as the real home has them.
	if realHome, err := os.UserHomeDir(); err == nil && os.Getenv("RUSTUP_HOME") == "" {
		t.Setenv("RUSTUP_HOME", filepath.Join(realHome, ".rustup"))
	}
	// The user's home, with credentials and shared caches in it.
	home := t.TempDir()
	t.Cleanup(func() { makeWritable(home) }) // before TempDir's removal
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("GOMODCACHE", gomodcache) // shared: read-only in the sandbox
	t.Setenv("GOPATH", "")
	secrets := map[string]string{
		".gitconfig":               "[user]\n\tname = Ada Tester\n\temail = ada@example.com\n[http]\n\textraheader = AUTHORIZATION: basic SECRET-GIT\n",
		".cache/huggingface/token": "SECRET-HF\n",
		".netrc":                   "machine example.com login ada password SECRET-NETRC\n",
		".npmrc":                   "//registry.npmjs.org/:_authToken=SECRET-NPM\n",
		".ssh/id_ed25519":          "SECRET-SSH\n",
		".aws/credentials":         "aws_secret_access_key = SECRET-AWS\n",
		".config/gh/hosts.yml":     "oauth_token: SECRET-GH\n",
		".cargo/credentials.toml":  "token = \"SECRET-CARGO\"\n",
		".cache/go-build/README":   "the user's shared build cache\n",
	}
	for name, content := range secrets {
		writeTestFile(t, filepath.Join(home, name), content)
	}
	integrity := npmFixture(t, home)

	opts := &tools.ShellOptions{DenyNetwork: true, DefaultTimeout: 10 * time.Minute}
	if cargo, err := exec.LookPath("cargo"); err == nil {
		// rustup's cargo lives in the real home; the test's home is
		// another.
		opts.ReadOnly = append(opts.ReadOnly, filepath.Dir(cargo))
	}
	ts, dir := sandboxed(t, opts)

	// The attack: read the credentials, poison the shared caches.
	poison := []string{
		filepath.Join(gomodcache, "cache", "download", fmt.Sprintf("hrns-attack-%d", os.Getpid())),
		filepath.Join(home, ".cache", "go-build", "hrns-attack"),
		filepath.Join(home, ".npm", "_cacache", "hrns-attack"),
	}
	var sh strings.Builder
	for name := range secrets {
		fmt.Fprintf(&sh, "cat %s/%s; ", home, name)
	}
	sh.WriteString("git config --get http.extraheader; ls -a ~; ")
	for _, p := range poison {
		fmt.Fprintf(&sh, "echo pwned > %s; ", p)
	}
	sh.WriteString("echo HOME=$HOME; go env GOMODCACHE GOCACHE GOPATH")
	r := run(t, t.Context(), ts, sh.String(), 0)
	t.Logf("attack:\n%s", r.text)
	if strings.Contains(r.text, "SECRET-") {
		t.Errorf("the command read a secret of the user's home:\n%s", r.text)
	}
	for _, p := range poison {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("the command wrote the shared cache: %s", p)
		}
	}
	private := filepath.Join(home, ".cache", "hrns", "sandbox")
	for _, l := range strings.Split(r.text, "\n")[len(strings.Split(r.text, "\n"))-5:] {
		if strings.HasPrefix(l, "/") || strings.HasPrefix(l, "HOME=") {
			if p := strings.TrimPrefix(l, "HOME="); !strings.HasPrefix(p, private+"/") {
				t.Errorf("%q is not in the workdir's private home under %s", l, private)
			}
		}
	}

	// Go: build and test a module that needs go-cmp, offline.
	writeTestFile(t, filepath.Join(dir, "go.mod"), "module example.com/t\n\ngo 1.22\n\nrequire github.com/google/go-cmp v0.7.0\n")
	writeTestFile(t, filepath.Join(dir, "go.sum"), "github.com/google/go-cmp v0.7.0 h1:wk8382ETsv4JYUZwIsn6YpYiWiBsYLSJiTsyBybVuN8=\n"+
		"github.com/google/go-cmp v0.7.0/go.mod h1:pXiqmnSA92OHEEa9HXL2W4E7lf9JzCmGVUdgjX3N/iU=\n")
	writeTestFile(t, filepath.Join(dir, "t.go"), "package t\n\nimport \"github.com/google/go-cmp/cmp\"\n\nfunc Same(a, b string) bool { return cmp.Diff(a, b) == \"\" }\n")
	writeTestFile(t, filepath.Join(dir, "t_test.go"), "package t\n\nimport \"testing\"\n\nfunc TestSame(t *testing.T) {\n\tif !Same(\"a\", \"a\") || Same(\"a\", \"b\") {\n\t\tt.Fatal(\"Same\")\n\t}\n}\n")
	r = run(t, t.Context(), ts, "go build ./... && go test -count=1 ./... && echo GO-OK", 0)
	if !strings.Contains(r.text, "GO-OK") {
		t.Errorf("go build and go test failed offline:\n%s", r.text)
	}

	// git: the user's name, not the rest of the configuration.
	r = run(t, t.Context(), ts, "git init -q && git add go.mod && git commit -qm first && git log --format=%an", 0)
	if !strings.Contains(r.text, "Ada Tester\n") {
		t.Errorf("git commit lacks the user's name:\n%s", r.text)
	}

	if integrity != "" {
		writeTestFile(t, filepath.Join(dir, "web", "package.json"), `{"name":"web","version":"1.0.0","dependencies":{"hrns-fixture":"1.0.0"}}`)
		writeTestFile(t, filepath.Join(dir, "web", "package-lock.json"), npmLock(integrity))
		r = run(t, t.Context(), ts, "cd web && npm ci --no-audit --no-fund && node -e 'console.log(\"NPM-\" + require(\"hrns-fixture\"))'", 0)
		if !strings.Contains(r.text, "NPM-42") {
			t.Errorf("npm ci failed offline:\n%s", r.text)
		}
	}
	if _, err := exec.LookPath("cargo"); err == nil {
		r = run(t, t.Context(), ts, "cargo new -q --vcs none hello && cd hello && cargo build -q --offline && ./target/debug/hello", 0)
		if !strings.Contains(r.text, "Hello, world!") {
			t.Errorf("cargo build failed offline:\n%s", r.text)
		}
	} else {
		t.Log("cargo is not installed: cargo build not tested")
	}
}

// goEnv returns a variable of go env.
func goEnv(t *testing.T, k string) string {
	t.Helper()
	out, err := exec.Command("go", "env", k).Output()
	if err != nil {
		t.Skipf("go env: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// npmFixture puts the package hrns-fixture@1.0.0 in the npm cache of home,
// as a download would have, and returns its integrity; "" if there is no
// npm to do it.
func npmFixture(t *testing.T, home string) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Log("npm is not installed: npm ci not tested")
		return ""
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Log("node is not installed: npm ci not tested")
		return ""
	}
	pkg := t.TempDir()
	writeTestFile(t, filepath.Join(pkg, "package.json"), `{"name":"hrns-fixture","version":"1.0.0","main":"index.js"}`)
	writeTestFile(t, filepath.Join(pkg, "index.js"), "module.exports = 42\n")
	for _, args := range [][]string{{"pack", "--silent"}, {"cache", "add", "./hrns-fixture-1.0.0.tgz", "--cache", filepath.Join(home, ".npm")}} {
		cmd := exec.Command("npm", args...)
		cmd.Dir = pkg
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm %v: %v\n%s", args, err, out)
		}
	}
	tgz, err := os.ReadFile(filepath.Join(pkg, "hrns-fixture-1.0.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(tgz)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// npmLock is a lock file for a package that needs hrns-fixture.
func npmLock(integrity string) string {
	return `{"name":"web","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{` +
		`"":{"name":"web","version":"1.0.0","dependencies":{"hrns-fixture":"1.0.0"}},` +
		`"node_modules/hrns-fixture":{"version":"1.0.0","resolved":"https://registry.npmjs.org/hrns-fixture/-/hrns-fixture-1.0.0.tgz","integrity":"` +
		integrity + `"}}}`
}

// TestSandboxHomeWithoutUserCache: a process with no user cache directory
// (a service without HOME) gives its commands a home in the workdir.
func TestSandboxHomeWithoutUserCache(t *testing.T) {
	needLandlock(t)
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	ts, dir := sandboxed(t, nil)
	r := run(t, t.Context(), ts, "echo $HOME; touch ~/written && echo ok", 0)
	want := filepath.Join(dir, ".hrns", "home")
	if r.text != want+"\nok\n[exit code: 0]" {
		t.Errorf("got %q, want the home %s", r.text, want)
	}
}

// TestSandboxSharesGoBuildCache (issue 34, item 9): a sandboxed command's
// go build finds what the user's build cache already holds, so a workdir's
// first build does not rebuild it all; and what the command writes to its
// GOCACHE stays out of the user's cache, which it cannot write through its
// own path either.
func TestSandboxSharesGoBuildCache(t *testing.T) {
	needLandlock(t)
	shared := t.TempDir()
	t.Setenv("GOCACHE", shared)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("GOFLAGS", "")
	ts, dir := sandboxed(t, &tools.ShellOptions{DenyNetwork: true, DefaultTimeout: 5 * time.Minute})
	writeTestFile(t, filepath.Join(dir, "go.mod"), "module example.com/shared\n\ngo 1.22\n")
	writeTestFile(t, filepath.Join(dir, "p.go"), "package shared\n\n// F is built once, outside.\nfunc F() int { return 42 }\n")

	// The user builds it outside the sandbox: the shared cache holds it.
	cmd := exec.Command("go", "build", "-v", "./...")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "example.com/shared") {
		t.Fatalf("go build outside: %v\n%s", err, out)
	}
	before := listTree(t, shared)

	r := run(t, t.Context(), ts, "go build -v ./... && echo BUILT; echo poison > \"$(go env GOCACHE)/hrns-poison\" && echo WROTE-OWN; "+
		"echo poison > "+shared+"/hrns-poison2 || echo REFUSED-SHARED; go env GOCACHE", 0)
	t.Logf("in the sandbox:\n%s", r.text)
	if !strings.Contains(r.text, "BUILT") || !strings.Contains(r.text, "WROTE-OWN") || !strings.Contains(r.text, "REFUSED-SHARED") {
		t.Fatalf("the command did not build, write its own cache, or was not refused the shared one:\n%s", r.text)
	}
	if strings.Contains(r.text, "example.com/shared\n") {
		t.Errorf("the package was compiled again in the sandbox: the user's build cache was not used:\n%s", r.text)
	}
	if after := listTree(t, shared); after != before {
		t.Errorf("the user's build cache changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// listTree lists the names under dir, one per line.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimPrefix(p, dir) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
