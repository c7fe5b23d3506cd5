//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestClearSetIDNoLinkBelowWritable: the set-ID walk after root's
// commands reaches a writable path nested in another without following a
// link below that one. A command swapped d/sub, on the way to the
// writable d/sub/b, for a link to a host directory whose set-user-ID file
// changed while it ran (by anyone): the walk must not reach that file
// through the link (before, it followed d/sub and cleared the host
// file's bit). The file the command left in the directory it moved is
// cleared, as any other under d.
func TestClearSetIDNoLinkBelowWritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the walk clears what root's commands leave")
	}
	d, victim := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "sub/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(victim, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	since := inodeClock()
	hostFile := filepath.Join(victim, "b", "host-suid")
	left := filepath.Join(d, "sub/b", "left-suid")
	for _, p := range []string{hostFile, left} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
	}
	// The command's swap.
	if err := os.Rename(filepath.Join(d, "sub"), filepath.Join(d, "sub.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(d, "sub")); err != nil {
		t.Fatal(err)
	}
	cleared := clearSetID([]string{d, filepath.Join(d, "sub/b")}, since)
	if fi, err := os.Stat(hostFile); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("the host's set-user-ID file, reached through the command's link, lost its bit (%v, %v); cleared %q", fi.Mode(), err, cleared)
	}
	moved := filepath.Join(d, "sub.old/b/left-suid")
	if fi, err := os.Stat(moved); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("the command's set-user-ID file keeps its bit: %v, %v", fi.Mode(), err)
	}
	if !slices.Contains(cleared, moved) || len(cleared) != 1 {
		t.Errorf("cleared %q, want only %s", cleared, moved)
	}
}
