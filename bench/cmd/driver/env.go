package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hrns-dev/hrns/bench/internal/mock"
	"github.com/hrns-dev/hrns/bench/internal/task"
)

// env is where the driver builds and runs things.
type env struct {
	benchDir string // the bench module
	rootDir  string // the hrns module
	bin      string // built binaries
	work     string // the workdir of hrns run, holding the notes
	home     string // HOME of every client
	tmp      string // the driver's temporary folder
	pin      pin
	log      io.Writer
}

// findBenchDir returns the absolute path of dir after checking that it holds
// the bench module.
func findBenchDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil || !bytes.HasPrefix(b, []byte("module github.com/hrns-dev/hrns/bench\n")) {
		return "", fmt.Errorf("%s is not the bench folder: run the driver from bench/ or pass -bench-dir", abs)
	}
	return abs, nil
}

// exportHead writes the last commit of the repository at root into dst,
// and links the Node peers' installed packages into it.
func exportHead(ctx context.Context, root, benchDir, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	tar := dst + ".tar"
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "archive", "-o", tar, "HEAD").CombinedOutput(); err != nil {
		return fmt.Errorf("git archive HEAD (use -tree=working outside a git checkout): %w: %s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xf", tar, "-C", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, out)
	}
	os.Remove(tar)
	modules := filepath.Join(benchDir, "node", "node_modules")
	if _, err := os.Stat(modules); err == nil {
		if err := os.Symlink(modules, filepath.Join(dst, "bench", "node", "node_modules")); err != nil {
			return err
		}
	}
	return nil
}

// goEnv is the environment of go build and go test: nothing may be
// downloaded, and the local toolchain is used.
func goEnv() []string {
	return append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly")
}

// goBuild runs go build in dir.
func (e *env) goBuild(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("(cd %s && go build %s): %w\n%s", dir, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// buildCommon builds the mock and the clients of the bench module, which
// every measurement needs.
func (e *env) buildCommon(ctx context.Context) error {
	for _, d := range []string{e.bin, e.work, e.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return e.goBuild(ctx, e.benchDir, "-o", e.bin+"/", "./cmd/mock", "./cmd/raw", "./cmd/hrnsloop")
}

// writeNotes writes the files the tool calls of hrns run read.
func (e *env) writeNotes(toolCalls int) error {
	for k := 1; k <= toolCalls; k++ {
		p := task.NotePath(k)
		if err := os.MkdirAll(filepath.Join(e.work, filepath.Dir(p)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(e.work, p), []byte(task.NoteText(p)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// clientEnv is the environment of every client: a fresh HOME (so no user
// configuration is read), the mock's URL and a dummy key.
func (e *env) clientEnv(baseURL string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + e.home,
		"TMPDIR=" + os.TempDir(),
		"LANG=C.UTF-8",
		"NO_PROXY=*",
		"OPENAI_API_KEY=bench",
		"OPENAI_BASE_URL=" + baseURL,
		"OPENAI_MODEL=bench-model",
	}
}

// pin says how processes are pinned to CPUs.
type pin struct {
	taskset            string // path of taskset, or "" when not pinning
	note               string // why not, when not
	mockCPU, clientCPU int
}

// pinning checks that taskset and both CPUs are there.
func pinning(mockCPU, clientCPU int) pin {
	p := pin{mockCPU: mockCPU, clientCPU: clientCPU}
	path, err := exec.LookPath("taskset")
	if err != nil {
		p.note = "taskset is not installed (Debian: util-linux): processes were not pinned"
		return p
	}
	if n := onlineCPUs(); max(mockCPU, clientCPU) >= n {
		p.note = fmt.Sprintf("the machine has %d CPUs, fewer than -mock-cpu/-client-cpu need: processes were not pinned", n)
		return p
	}
	p.taskset = path
	return p
}

// command returns argv prefixed to run pinned to cpu.
func (p pin) command(cpu int, argv []string) []string {
	if p.taskset == "" {
		return argv
	}
	return append([]string{p.taskset, "-c", strconv.Itoa(cpu)}, argv...)
}

// mockProc is the running mock.
type mockProc struct {
	cmd     *exec.Cmd
	baseURL string // ends in /v1
	config  mock.Stats
}

// startMock builds nothing: it starts the mock built by buildCommon, pinned,
// and reads its URL.
// Extra arguments go to the mock.
func (e *env) startMock(ctx context.Context, cpu, toolCalls, argChunks, textChunks int, extra ...string) (*mockProc, error) {
	argv := e.pin.command(cpu, append([]string{filepath.Join(e.bin, "mock"), "--addr", "127.0.0.1:0",
		"--tool-calls", strconv.Itoa(toolCalls), "--arg-chunks", strconv.Itoa(argChunks), "--text-chunks", strconv.Itoa(textChunks)}, extra...))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = e.log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the mock: %w", err)
	}
	m := &mockProc{cmd: cmd}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("reading the mock's URL: %w", err)
	}
	m.baseURL = strings.TrimSpace(line)
	s, err := m.stats(ctx)
	if err != nil {
		m.stop()
		return nil, err
	}
	m.config = s
	return m, nil
}

func (m *mockProc) stop() {
	m.cmd.Process.Signal(syscall.SIGTERM)
	m.cmd.Wait()
}

// stats reads the mock's counts.
func (m *mockProc) stats(ctx context.Context) (mock.Stats, error) {
	var s mock.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(m.baseURL, "/v1")+"/stats", nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("mock stats: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("mock stats: %w", err)
	}
	return s, nil
}

// usage is what one process (or several, summed) cost.
type usage struct {
	cpu    time.Duration // user + system
	wall   time.Duration
	maxRSS int64 // bytes, the largest of the processes
	// minFaults are the minor page faults (the sum).
	minFaults int64
	conns     int64 // connections the mock accepted
}

func (u *usage) add(v usage) {
	u.cpu += v.cpu
	u.wall += v.wall
	u.maxRSS = max(u.maxRSS, v.maxRSS)
	u.minFaults += v.minFaults
	u.conns += v.conns
}

// runProcess runs argv pinned to the client CPU and returns its usage and
// standard output.
func (e *env) runProcess(ctx context.Context, dir string, argv []string, environ []string) (usage, []byte, error) {
	return e.runPinned(ctx, e.pin.clientCPU, dir, argv, environ)
}

// runPinned runs argv pinned to cpu and returns its usage and standard
// output.
func (e *env) runPinned(ctx context.Context, cpu int, dir string, argv []string, environ []string) (usage, []byte, error) {
	return e.runPinnedFor(ctx, cpu, dir, argv, environ, 5*time.Minute)
}

// runPinnedFor is runPinned with a bound of its own on the process.
func (e *env) runPinnedFor(ctx context.Context, cpu int, dir string, argv []string, environ []string, limit time.Duration) (usage, []byte, error) {
	argv = e.pin.command(cpu, argv)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return usage{}, nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	ps := cmd.ProcessState
	u := usage{cpu: ps.UserTime() + ps.SystemTime(), wall: wall}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		u.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
		u.minFaults = ru.Minflt
	}
	return u, stdout.Bytes(), nil
}

// errNotInstalled marks a client whose dependencies setup.sh did not
// install.
var errNotInstalled = errors.New("not installed")
