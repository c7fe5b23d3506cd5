//go:build linux

package sandbox_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hrns-dev/hrns/sandbox"
	"golang.org/x/sys/unix"
)

// setIDProbe leaves set-user-ID and set-group-ID copies of a shell in the
// working directory in every way a command can: chmod, install -m, a file
// created with the bits (cp keeps the mode of a set-user-ID source only
// for root, so chmod after), in a subdirectory, and a second name made by
// a hard link.
const setIDProbe = `cp /bin/sh rootsh && chmod 4755 rootsh
install -m 6755 /bin/sh rootsh-install
mkdir -p sub && cp /bin/sh sub/gidsh && chmod 2755 sub/gidsh
cp /bin/sh linked && chmod 4755 linked && ln linked sub/linked-too
ls -l rootsh rootsh-install sub/gidsh linked sub/linked-too
grep " $PWD " /proc/self/mountinfo`

// TestSetIDStripped (issue 32, finding 14): a command (as root, uid 0)
// leaves a set-user-ID shell in its working directory, inert in the
// sandbox but live once it ends. Run clears the bits of every file the
// command left with them (and removes the extra names of one with several
// links), and the working directory is mounted nosuid inside the sandbox.
// A set-user-ID file the command did not touch keeps its bits.
func TestSetIDStripped(t *testing.T) {
	for _, mode := range []string{"isolated", "landlock", "unconfined"} {
		t.Run(mode, func(t *testing.T) {
			if mode != "unconfined" {
				needLandlock(t, 1)
			}
			sandbox.SetNoIsolation(mode != "isolated")
			defer sandbox.SetNoIsolation(false)
			dir, extra := t.TempDir(), t.TempDir()
			// The user's own set-user-ID file, older than the command.
			kept := filepath.Join(dir, "users-own")
			if err := os.WriteFile(kept, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(kept, 0o755|os.ModeSetuid); err != nil {
				t.Fatal(err)
			}
			waitPast(t, kept)
			res := run(t, &sandbox.Spec{Shell: setIDProbe + "; cd " + extra + " && cp /bin/sh extra-sh && chmod 4755 extra-sh",
				Dir: dir, ReadWrite: []string{extra}, Unconfined: mode == "unconfined"})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Output)
			}
			if !strings.Contains(res.Output, "rwsr-xr-x") {
				t.Fatalf("the command did not make a set-user-ID file: %s", res.Output)
			}
			if mode == "isolated" && !strings.Contains(res.Output, "nosuid") {
				t.Errorf("the working directory is not mounted nosuid in the sandbox:\n%s", res.Output)
			}
			for _, p := range []string{"rootsh", "rootsh-install", "sub/gidsh", "linked", "sub/linked-too", extra + "/extra-sh"} {
				if !filepath.IsAbs(p) {
					p = filepath.Join(dir, p)
				}
				fi, err := os.Lstat(p)
				if err != nil {
					continue // removed: one of several names
				}
				if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%s is left %v", p, fi.Mode())
				}
			}
			// Of the two names of one file, one stays, without its bits.
			_, err1 := os.Lstat(filepath.Join(dir, "linked"))
			_, err2 := os.Lstat(filepath.Join(dir, "sub/linked-too"))
			if err1 != nil && err2 != nil {
				t.Errorf("both names of the hard-linked file are gone")
			}
			if fi, err := os.Lstat(kept); err != nil || fi.Mode()&os.ModeSetuid == 0 {
				t.Errorf("the user's own set-user-ID file, untouched by the command: %v, %v", fi.Mode(), err)
			}
			want := []string{filepath.Join(dir, "rootsh"), filepath.Join(dir, "rootsh-install"), filepath.Join(dir, "sub/gidsh"), filepath.Join(extra, "extra-sh")}
			for _, p := range want {
				if !slices.Contains(res.SetIDCleared, p) {
					t.Errorf("SetIDCleared %q lacks %s", res.SetIDCleared, p)
				}
			}
		})
	}
}

// waitPast waits until the clock the kernel stamps inodes with has moved
// past p's change time, so that p is older than what a command started
// now changes.
func waitPast(t *testing.T, p string) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now); err != nil {
			t.Fatal(err)
		}
		if now.Nano() > st.Ctim.Nano() {
			return
		}
		if i > 1e7 {
			t.Fatal("the coarse clock does not move")
		}
	}
}
