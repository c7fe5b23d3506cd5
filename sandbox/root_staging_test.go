//go:build linux

package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
)

// TestGrantAboveStaging: /tmp, where the command's root is staged,
// granted, with the working directory below it. Before the fix the root
// could not be built ("mkdir /tmp/tmp/...: read-only file system") and
// the command ran confined by Landlock alone, not isolated. Through Run
// and a Box, with and without mount_setattr(2): the command is isolated,
// sees the host's /tmp, may write its working directory, may not write a
// read-only /tmp, and sees nothing outside its grants.
func TestGrantAboveStaging(t *testing.T) {
	needIsolation(t)
	cases := []struct {
		name string
		// grant: read-write rather than read-only.
		rw bool
		// privateTmp: the spec's PrivateTmp, under the granted /tmp.
		privateTmp bool
	}{
		{name: "read-only"},
		{name: "read-write", rw: true},
		{name: "read-only over a private /tmp", privateTmp: true},
	}
	for _, via := range []string{"run", "box"} {
		for _, setattr := range []string{"setattr", "nosetattr"} {
			for _, tc := range cases {
				t.Run(via+"/"+setattr+"/"+tc.name, func(t *testing.T) {
					sandbox.SetNoSetattr(setattr == "nosetattr")
					defer sandbox.SetNoSetattr(false)
					dir, err := os.MkdirTemp("/tmp", "hrns-staging-")
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { os.RemoveAll(dir); os.Remove(dir + ".sibling") })
					if err := os.WriteFile(filepath.Join(dir, "host.txt"), []byte("host\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					// Outside the grants: a host directory not in /tmp.
					outside, err := os.MkdirTemp("/var/tmp", "hrns-outside-")
					if err != nil {
						t.Skipf("no directory outside /tmp: %v", err)
					}
					t.Cleanup(func() { os.RemoveAll(outside) })
					if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					spec := sandbox.Spec{Dir: dir, PrivateTmp: tc.privateTmp, Timeout: time.Minute, Env: []string{"OUT=" + outside, "DIR=" + dir}}
					if tc.rw {
						spec.ReadWrite = []string{"/tmp"}
					} else {
						spec.ReadOnly = []string{"/tmp"}
					}
					spec.Shell = `echo "pwd $(pwd)"; cat "$DIR/host.txt" host.txt
echo made > made.txt && echo "made $(cat made.txt)"
if { echo x > /tmp/` + filepath.Base(dir) + `.sibling; } 2>/dev/null; then echo "wrote /tmp"; fi
cat "$OUT/secret.txt" 2>/dev/null; if test -e "$OUT"; then echo "sees $OUT"; fi; true`
					var res *sandbox.Result
					if via == "box" {
						b, err := sandbox.NewBox(&spec)
						if err != nil {
							t.Fatal(err)
						}
						defer b.Close()
						res, err = b.Run(context.Background(), &spec)
						if err != nil {
							t.Fatal(err)
						}
						// A private /tmp is one command's: such a Box
						// runs each as Run does.
						if why := sandbox.BoxPerCall(b); why != "" && !tc.privateTmp {
							t.Fatalf("the Box runs its commands as Run does: %s", why)
						}
					} else {
						res, err = sandbox.Run(context.Background(), &spec)
						if err != nil {
							t.Fatal(err)
						}
					}
					if !res.Confinement.Isolated {
						t.Fatalf("not isolated: %s", res.Confinement.Summary())
					}
					want := "pwd " + dir + "\nhost\nhost\nmade made\n"
					if tc.rw {
						want += "wrote /tmp\n"
					}
					if res.ExitCode != 0 || res.Output != want {
						t.Fatalf("exit %d, output:\n%s\nwant:\n%s", res.ExitCode, res.Output, want)
					}
					_, err = os.Stat(dir + ".sibling")
					if tc.rw != (err == nil) {
						t.Errorf("%s.sibling on the host: %v, want it made only where /tmp is writable", dir, err)
					}
					if b, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || !strings.HasPrefix(string(b), "made") {
						t.Errorf("made.txt on the host: %q, %v", b, err)
					}
				})
			}
		}
	}
}
