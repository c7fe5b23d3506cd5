package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/sandbox"
	"github.com/hrns-dev/hrns/session"
)

// servingCmd is hrns serve run in this process by startServe.
type servingCmd struct {
	url  string // http://127.0.0.1:PORT
	port string
	logs *syncBuffer
}

var listeningRE = regexp.MustCompile(`listening on http://(\S+)`)

// startServe runs "hrns serve args" in this process with the environment
// env (HOME is a temporary directory unless env sets it; nil means this
// process's environment) until the test ends, and returns once it
// listens.
func startServe(t *testing.T, env map[string]string, args ...string) *servingCmd {
	t.Helper()
	e := map[string]string{"HOME": t.TempDir()}
	for k, v := range env {
		e[k] = v
	}
	getenv := func(k string) string { return e[k] }
	if env == nil {
		getenv = nil
	}
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	var code int
	go func() {
		defer close(done)
		code = Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), &IO{Out: io.Discard, Err: logs, Getenv: getenv})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("hrns serve:\n%s", logs.String())
		}
	})
	for range 1000 {
		if m := listeningRE.FindStringSubmatch(logs.String()); m != nil {
			_, port, _ := net.SplitHostPort(m[1])
			return &servingCmd{url: "http://" + m[1], port: port, logs: logs}
		}
		select {
		case <-done:
			t.Fatalf("hrns serve exited %d:\n%s", code, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("hrns serve did not start:\n%s", logs.String())
	return nil
}

// runServe runs "hrns serve args" in this process with env for at most a
// few seconds (a server that starts is stopped then) and returns its exit
// code and standard error.
func runServe(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	e := map[string]string{"HOME": t.TempDir(), "OPENAI_API_KEY": "k"}
	for k, v := range env {
		e[k] = v
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var stderr syncBuffer
	code := Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--model", "m"}, args...), &IO{Out: io.Discard, Err: &stderr, Getenv: func(k string) string { return e[k] }})
	return code, stderr.String()
}

// TestServeRefusesKeysInArgv: issue 13, break 3. A key given as
// --api-key is in /proc/PID/cmdline, which the agents' commands read; hrns
// serve refuses it (without echoing it) and says what to use instead.
func TestServeRefusesKeysInArgv(t *testing.T) {
	code, stderr := runServe(t, nil, "--api-key", "sk-in-argv", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	if code != ExitUsage || !strings.Contains(stderr, "HRNS_API_KEYS") || !strings.Contains(stderr, "--api-keys-file") {
		t.Errorf("exit %d, stderr %q; want %d and what to use instead", code, stderr, ExitUsage)
	}
	if strings.Contains(stderr, "sk-in-argv") {
		t.Errorf("the error repeats the key: %q", stderr)
	}
}

// TestServeUnsetsKeysVariable checks that hrns serve, reading its keys
// from its environment, removes HRNS_API_KEYS and HRNS_OPERATOR_KEYS
// from it, so that nothing it starts inherits them.
func TestServeUnsetsKeysVariable(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{"HOME": home, "XDG_CONFIG_HOME": home, "HRNS_CONFIG": "", "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-from-env", "HRNS_OPERATOR_KEYS": "sk-operator-from-env"} {
		t.Setenv(k, v)
	}
	s := startServe(t, nil, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	for _, name := range []string{"HRNS_API_KEYS", "HRNS_OPERATOR_KEYS"} {
		if v, ok := os.LookupEnv(name); ok {
			t.Errorf("%s=%q is still in the environment", name, v)
		}
	}
	if status, body := s.get(t, "GET", "/api/v2/replicas", "sk-operator-from-env"); status != http.StatusOK {
		t.Errorf("the operator key of the environment: %d %s", status, body)
	}
	req, _ := http.NewRequest("GET", s.url+"/api/v2/sessions", nil)
	req.Header.Set("Authorization", "Bearer sk-from-env")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the key of the environment: %d", resp.StatusCode)
	}
}

// TestServeKeysFile checks --api-keys-file: a 0600 file of keys works;
// one others may read, or that holds no key, is refused.
func TestServeKeysFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	db := "sqlite:" + filepath.Join(t.TempDir(), "h.db")
	for _, tt := range []struct {
		name, path, want string
	}{
		{"group-readable", write("g", "sk-1\n", 0o640), "chmod 600"},
		{"world-readable", write("w", "sk-1\n", 0o604), "chmod 600"},
		{"empty", write("e", "# no keys yet\n\n", 0o600), "no key"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
		{"a directory", dir, "regular file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runServe(t, nil, "--api-keys-file", tt.path, "--db", db)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tt.want)
			}
		})
	}

	keys := write("keys", "# team keys\nsk-file-a\n\n  sk-file-b  \n", 0o600)
	s := startServe(t, map[string]string{"OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-env"}, "--model", "m", "--api-keys-file", keys, "--db", db)
	for key, want := range map[string]int{"sk-file-a": 200, "sk-file-b": 200, "sk-env": 200, "": 401, "# team keys": 401, "sk-other": 401} {
		req, _ := http.NewRequest("GET", s.url+"/api/v2/sessions", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
}

// TestServeKeysNotVisibleToTools runs the real hrns serve with its keys
// in HRNS_API_KEYS and an agent whose run_command looks for them where
// break 3's attack found them: the server's command line and environment
// in /proc, and the command's own environment. The key must not reach
// the tool's output. (That --api-key is refused is
// TestServeRefusesKeysInArgv.)
func TestServeKeysNotVisibleToTools(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the hrns binary")
	}
	if _, err := sandbox.Supported(); err != nil {
		// Unconfined commands can read /proc/PID/environ of the server,
		// as docs/serve.md says.
		t.Skipf("commands are not sandboxed here: %v", err)
	}
	dir := t.TempDir()
	bin := hrnsBinary(t)
	const key = "sk-tenant-a-3f9c1d"
	var pid atomic.Int64
	look := func([]byte) openaitest.Reply {
		p := pid.Load()
		cmd := fmt.Sprintf(`echo ENV:; env; echo CMDLINE:; tr '\0' ' ' < /proc/%d/cmdline; echo; echo ENVIRON:; tr '\0' '\n' < /proc/%d/environ; echo PARENT:; tr '\0' '\n' < /proc/$PPID/environ; echo END`, p, p)
		args, _ := json.Marshal(map[string]string{"command": cmd})
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "run_command", string(args))}}
	}
	model := openaitest.NewServer(openaitest.Reply{Func: look}, openaitest.Reply{Text: "done"})
	defer model.Close()

	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	agents := filepath.Join(dir, "agents")
	os.Mkdir(agents, 0o755)
	os.WriteFile(filepath.Join(agents, "shell.md"), []byte("---\ntools: [run_command]\n---\nRun commands.\n"), 0o644)
	addr := freeAddr(t)
	home := t.TempDir()
	var logs syncBuffer
	cmd := exec.Command(bin, "serve", "--addr", addr, "--db", "sqlite:"+filepath.Join(dir, "hrns.db"), "--model", "test-model",
		"--agents", agents, "--workdir", work, "--yes")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=test", "HRNS_API_KEYS=" + key + ",sk-tenant-b"}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid.Store(int64(cmd.Process.Pid))
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("hrns serve:\n%s", logs.String())
		}
	}()
	c := client.New("http://"+addr, key, &client.Options{RetryDelay: 20 * time.Millisecond, MaxAttempts: 200})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := c.RunSession(ctx, &client.SessionRequest{Agent: client.AgentRef{Name: "shell"}, Messages: client.Text("look around")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != session.StatusCompleted {
		t.Fatalf("session ended %s: %s", res.Status, res.Error)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	seen := string(reqs[1].Body) // the command's output, as the model reads it
	if !strings.Contains(seen, "ENV:") || !strings.Contains(seen, "END") {
		t.Fatalf("the command did not run: %s", seen)
	}
	// Where the sandbox isolates processes, /proc holds neither the
	// server's command line nor its environment; where it does not,
	// the command line is readable and must hold no key.
	t.Logf("server's command line readable: %v", strings.Contains(seen, "serve --addr"))
	if strings.Contains(seen, key) || strings.Contains(seen, "sk-tenant-b") || strings.Contains(seen, "HRNS_API_KEYS") {
		t.Errorf("a key reached the tool's output:\n%s", seen)
	}
}

// TestServeStoreInWorkdir: issue 13, break 7. With the SQLite store in
// the agents' workdir, an agent edited it and took over another tenant's
// sessions; hrns serve must refuse to start, whichever links lead there.
func TestServeStoreInWorkdir(t *testing.T) {
	work := t.TempDir()
	other := t.TempDir()
	os.WriteFile(filepath.Join(work, "existing.db"), nil, 0o600)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(work, filepath.Join(other, "work-link")))                                         // a link to the workdir
	must(os.Symlink(filepath.Join(work, "existing.db"), filepath.Join(other, "db-link.db")))          // a link to a database in it
	must(os.Symlink(filepath.Join(work, "later.db"), filepath.Join(other, "dangling.db")))            // one SQLite would create there
	must(os.Symlink(filepath.Join(work, "later.db-wal"), filepath.Join(other, "wal-only.db-wal")))    // only the WAL is in it
	must(os.Symlink(filepath.Join(work, "later.db.lock"), filepath.Join(other, "lock-only.db.lock"))) // only the lock

	os.WriteFile(filepath.Join(work, "keys"), []byte("sk-1\n"), 0o600)
	os.WriteFile(filepath.Join(work, "config.toml"), []byte("api_keys = [\"sk-2\"]\n"), 0o600)
	os.WriteFile(filepath.Join(work, "operators.toml"), []byte("operator_keys = [\"sk-3\"]\n"), 0o600)
	for _, tt := range []struct {
		name     string
		chdir    string
		workdir  string
		db       []string
		inWorkir bool
	}{
		{"the keys file in the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "h.db"), "--api-keys-file", filepath.Join(work, "keys")}, true},
		{"the config file in the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "h.db"), "--config", filepath.Join(work, "config.toml")}, true},
		{"the operator keys file in the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "h.db"), "--operator-keys-file", filepath.Join(work, "keys")}, true},
		{"a config file of operator keys in the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "h.db"), "--config", filepath.Join(work, "operators.toml")}, true},
		{"--workdir . with the default hrns.db", work, ".", nil, true},
		{"the database in the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(work, "hrns.db")}, true},
		{"the database deeper in the workdir", "", work, []string{"--db", filepath.Join(work, "a", "b", "hrns.db")}, true},
		{"the workdir through a link", "", filepath.Join(other, "work-link"), []string{"--db", "sqlite:" + filepath.Join(work, "hrns.db")}, true},
		{"the database through a link to the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "work-link", "hrns.db")}, true},
		{"the database a link into the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "db-link.db")}, true},
		{"the database a dangling link into the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "dangling.db")}, true},
		{"the WAL a link into the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "wal-only.db")}, true},
		{"the lock a link into the workdir", "", work, []string{"--db", "sqlite:" + filepath.Join(other, "lock-only.db")}, true},
		{"the workdir inside the database's directory", "", filepath.Join(other, "work-link"), []string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "hrns.db")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.chdir != "" {
				t.Chdir(tt.chdir)
			}
			code, stderr := runServe(t, nil, append([]string{"--workdir", tt.workdir}, tt.db...)...)
			if tt.inWorkir {
				if code != ExitUsage || !strings.Contains(stderr, "inside --workdir") {
					t.Errorf("exit %d, stderr %q; want %d and the store inside --workdir", code, stderr, ExitUsage)
				}
				return
			}
			if code == ExitUsage || strings.Contains(stderr, "inside --workdir") {
				t.Errorf("exit %d, stderr %q; want the server to start", code, stderr)
			}
		})
	}
}

// TestServeSessionWorkdirs: issue 13, break 7. Each session's tools work
// in a directory of its own, DIR/sessions/NAME (mode 0700): a file one
// tenant's session writes is out of reach of another's, and nothing is
// written to DIR itself.
func TestServeSessionWorkdirs(t *testing.T) {
	work := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[agents.coder]\ninstructions = \"Code.\"\ntools = [\"write_file\", \"read_file\", \"list_files\"]\n"), 0o600)
	call := func(name, args string) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_"+name, name, args)}}
	}
	model := openaitest.NewServer(
		call("write_file", `{"path":"secret.txt","content":"tenant A's secret"}`), openaitest.Reply{Text: "written"},
		call("read_file", `{"path":"secret.txt"}`), call("list_files", `{"pattern":"**"}`),
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			// Tenant A's directory, by its name.
			dirs, _ := os.ReadDir(filepath.Join(work, "sessions"))
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(work, "sessions", d.Name(), "secret.txt")); err == nil {
					return call("read_file", `{"path":"../`+d.Name()+`/secret.txt"}`)
				}
			}
			return call("read_file", `{"path":"../secret.txt"}`)
		}},
		openaitest.Reply{Text: "nothing"},
	)
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a,sk-b"},
		"--model", "test-model", "--config", cfg, "--workdir", work, "--yes", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
	run := func(key string) {
		t.Helper()
		c := client.New(s.url, key, nil)
		res, err := c.RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Name: "coder"}, Messages: client.Text("go")})
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("session of %s: %v %+v", key, err, res)
		}
	}
	// A refused request leaves no directory behind.
	req, _ := http.NewRequest("POST", s.url+"/api/v2/sessions", strings.NewReader(`{"agent":"coder","messages":"go","max_steps":0}`))
	req.Header.Set("Authorization", "Bearer sk-a")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if dirs, _ := os.ReadDir(filepath.Join(work, "sessions")); resp.StatusCode != http.StatusUnprocessableEntity || len(dirs) != 0 {
		t.Errorf("a refused request (%d) left %d directories", resp.StatusCode, len(dirs))
	}
	run("sk-a")
	run("sk-b")

	for i, r := range model.Requests()[2:] {
		if bytes.Contains(r.Body, []byte("tenant A's secret")) {
			t.Errorf("request %d of tenant B's session holds tenant A's file:\n%s", i, r.Body)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "secret.txt")); err == nil {
		t.Errorf("the file was written to the workdir itself")
	}
	dirs, _ := os.ReadDir(filepath.Join(work, "sessions"))
	if len(dirs) != 2 {
		t.Fatalf("%d session directories, want 2: %v", len(dirs), dirs)
	}
	holding := 0
	for _, d := range []string{work + "/sessions", filepath.Join(work, "sessions", dirs[0].Name()), filepath.Join(work, "sessions", dirs[1].Name())} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want 0700", d, err, fi.Mode().Perm())
		}
		if b, err := os.ReadFile(filepath.Join(d, "secret.txt")); err == nil && string(b) == "tenant A's secret" {
			holding++
		}
	}
	if holding != 1 {
		t.Errorf("%d directories hold the secret, want 1", holding)
	}
}

// TestServeBrowserRules: issue 13, break 8, through the real command. A
// keyless hrns serve on loopback refuses the attack (a text/plain POST
// with a foreign Origin and a rebinding Host), answers the hosts and
// origins the operator allows, and still serves curl-like requests.
func TestServeBrowserRules(t *testing.T) {
	model := openaitest.NewServer()
	defer model.Close()
	for range 20 {
		model.Push(openaitest.Reply{Text: "done"})
	}
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"),
		"--allowed-host", "hrns.internal", "--cors-origin", "https://app.example")
	evil := "evil.example:" + s.port
	body := `{"agent":{"name":"a"},"messages":"run id"}`
	for _, tt := range []struct {
		name   string
		host   string
		header []string
		want   int
	}{
		{"the attack", evil, []string{"Content-Type", "text/plain;charset=UTF-8", "Origin", "http://" + evil}, 403},
		{"foreign Origin", "", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, 403},
		{"rebinding Host", evil, []string{"Content-Type", "application/json"}, 403},
		{"text/plain", "", []string{"Content-Type", "text/plain"}, 415},
		{"curl", "", []string{"Content-Type", "application/json"}, 201},
		{"curl at localhost", "localhost:" + s.port, []string{"Content-Type", "application/json"}, 201},
		{"an allowed host", "hrns.internal", []string{"Content-Type", "application/json"}, 201},
		{"the CORS origin", "", []string{"Content-Type", "application/json", "Origin", "https://app.example"}, 201},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", s.url+"/api/v2/sessions", strings.NewReader(body))
			if tt.host != "" {
				req.Host = tt.host
			}
			for i := 0; i+1 < len(tt.header); i += 2 {
				req.Header.Set(tt.header[i], tt.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
		})
	}
	// The Go SDK.
	if res, err := client.New(s.url, "", nil).RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "sdk"}}, Messages: client.Text("hi")}); err != nil || res.Status != session.StatusCompleted {
		t.Errorf("SDK: %v %+v", err, res)
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		dir, p string
		want   bool
	}{
		{"/a", "/a", true},
		{"/a", "/a/b", true},
		{"/a", "/a/b/../c", true},
		{"/a", "/ab", false},
		{"/a", "/", false},
		{"/a/b", "/a", false},
		{"/a", "/a/..b", true},
		{"/", "/x", true},
	} {
		if got := within(tt.dir, filepath.Clean(tt.p)); got != tt.want {
			t.Errorf("within(%q, %q) = %v, want %v", tt.dir, tt.p, got, tt.want)
		}
	}
}

func TestRealPath(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "real"), 0o755)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link"))
	os.Symlink("real/later", filepath.Join(dir, "dangling"))
	os.Symlink("loop2", filepath.Join(dir, "loop1"))
	os.Symlink("loop1", filepath.Join(dir, "loop2"))
	for _, tt := range []struct{ in, want string }{
		{"link", "real"},
		{"link/new/deeper.db", "real/new/deeper.db"},
		{"dangling", "real/later"},
		{"dangling-wal", "dangling-wal"},
	} {
		got, err := realPath(filepath.Join(dir, tt.in))
		if err != nil || got != filepath.Join(dir, tt.want) {
			t.Errorf("realPath(%s) = %q, %v; want %q", tt.in, got, err, filepath.Join(dir, tt.want))
		}
	}
	if _, err := realPath(filepath.Join(dir, "loop1")); err == nil {
		t.Errorf("realPath of a link loop: no error")
	}
}
