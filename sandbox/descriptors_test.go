//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/sandbox"
)

// descriptorsEnv asks the re-executed test binary to run a command through
// the sandbox (descriptorsHelper), with the descriptors it inherited open:
// its value is the mode, "isolated", "landlock" (no namespaces) or
// "unconfined".
const descriptorsEnv = "SANDBOX_TEST_INHERITED_FDS"

// descriptorsProbe tries every descriptor from 3 to 12: read what it
// holds, write to it, and list what is open.
const descriptorsProbe = `for fd in 3 4 5 6 7 8 9 10 11 12; do
  (eval "cat <&$fd") 2>/dev/null && echo "read fd $fd"
  (eval "echo WRITTEN-BY-THE-COMMAND >&$fd") 2>/dev/null && echo "wrote fd $fd"
done
ls -l /proc/self/fd`

// descriptorsHelper serves TestInheritedDescriptors in the re-executed
// test binary: it runs descriptorsProbe through the sandbox and prints its
// output. It returns only if the run is not its own.
func descriptorsHelper() {
	mode := os.Getenv(descriptorsEnv)
	if mode == "" {
		return
	}
	dir, err := os.MkdirTemp("", "fds-test-")
	if err != nil {
		fmt.Println("mkdir:", err)
		os.Exit(1)
	}
	sandbox.SetNoIsolation(mode != "isolated")
	res, err := sandbox.Run(context.Background(), &sandbox.Spec{Shell: descriptorsProbe, Dir: dir, Unconfined: mode == "unconfined"})
	os.RemoveAll(dir)
	if err != nil {
		fmt.Println("run:", err)
		os.Exit(1)
	}
	fmt.Print(res.Output)
	os.Exit(0)
}

// TestInheritedDescriptors (issue 32, finding 4): descriptors that whoever
// started this process left open (a 0600 file to read, a file outside the
// command's paths to write) do not reach the command, confined or not: it
// can neither read the one nor write the other.
func TestInheritedDescriptors(t *testing.T) {
	outside := t.TempDir()
	const secret = "DECOY-SECRET-0600-4c1d"
	secretPath := filepath.Join(outside, "hrns-fd-secret")
	if err := os.WriteFile(secretPath, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	targetPath := filepath.Join(outside, "hrns-fd-target")
	if err := os.WriteFile(targetPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"isolated", "landlock", "unconfined"} {
		t.Run(mode, func(t *testing.T) {
			if mode != "unconfined" {
				needLandlock(t, 1)
			}
			// Four descriptors: 3 and 4, where the helper's own pipes
			// go, and 5 and 6, which nothing of the sandbox replaces.
			var files []*os.File
			for range 2 {
				r, err := os.Open(secretPath)
				if err != nil {
					t.Fatal(err)
				}
				w, err := os.OpenFile(targetPath, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, r, w)
			}
			defer func() {
				for _, f := range files {
					f.Close()
				}
			}()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), descriptorsEnv+"="+mode)
			cmd.ExtraFiles = files
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := string(out)
			if strings.Contains(got, secret) || strings.Contains(got, "read fd") {
				t.Errorf("the command read an inherited descriptor:\n%s", got)
			}
			if strings.Contains(got, "wrote fd") {
				t.Errorf("the command wrote an inherited descriptor:\n%s", got)
			}
			if b, _ := os.ReadFile(targetPath); len(b) > 0 {
				t.Errorf("the file outside the command's paths holds %q", b)
			}
			if strings.Contains(got, "hrns-fd-") {
				t.Errorf("an inherited descriptor is open in the command:\n%s", got)
			}
			if n := strings.Count(got, " -> "); n != 4 {
				t.Errorf("%d descriptors are open in the command, want 0, 1, 2 and ls's own:\n%s", n, got)
			}
		})
	}
}
