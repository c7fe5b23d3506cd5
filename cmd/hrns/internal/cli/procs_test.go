package cli

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The tests that run hrns as a real process (crash, replica, poison and
// guard tests) share one binary, built once per test process.
var hrnsBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// hrnsBinary returns the path of an hrns binary built from this module.
func hrnsBinary(t testing.TB) string {
	t.Helper()
	hrnsBin.once.Do(func() {
		hrnsBin.dir, hrnsBin.err = os.MkdirTemp("", "hrns-cli-test")
		if hrnsBin.err != nil {
			return
		}
		hrnsBin.path = filepath.Join(hrnsBin.dir, "hrns")
		hrnsBin.out, hrnsBin.err = exec.Command("go", "build", "-o", hrnsBin.path, "github.com/hrns-dev/hrns/cmd/hrns").CombinedOutput()
	})
	if hrnsBin.err != nil {
		t.Fatalf("go build: %v\n%s", hrnsBin.err, hrnsBin.out)
	}
	return hrnsBin.path
}

// freeAddr returns a loopback address no one listens on (yet).
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServeProcess starts `hrns serve`, as a process of its own, with args (after "serve") and the
// environment env, its output in logs, and waits until it answers
// /healthz on addr with 200 (it fails the test after 10 s).
func startServeProcess(t testing.TB, addr string, args, env []string, logs io.Writer, show func() string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(hrnsBinary(t), append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitHealthy(addr) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("hrns serve did not start:\n%s", show())
	}
	return cmd
}

// waitHealthy waits, up to 10 s, for a server on addr to answer /healthz
// with 200.
func waitHealthy(addr string) bool {
	for range 1000 {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestMain(m *testing.M) {
	code := m.Run()
	if hrnsBin.dir != "" {
		os.RemoveAll(hrnsBin.dir)
	}
	os.Exit(code)
}
