package cli

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
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

func TestMain(m *testing.M) {
	code := m.Run()
	if hrnsBin.dir != "" {
		os.RemoveAll(hrnsBin.dir)
	}
	os.Exit(code)
}
