//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
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

// TestOpenGrant: openGrant follows the links above every writable path,
// none at or below one (a link, "..", a file where a directory is
// needed), and writableRegions finds a writable path named through a link
// to another as nested in it.
func TestOpenGrant(t *testing.T) {
	top, host := t.TempDir(), t.TempDir()
	d := filepath.Join(top, "d")
	for _, p := range []string{d + "/sub/b", host + "/b"} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(d+"/file", nil, 0o644))
	must(os.Symlink(d, top+"/alias"))             // the operator's, above d
	must(os.Symlink(host, d+"/link"))             // below d: a command's
	must(os.Symlink("sub", d+"/rel"))             // below d, even inside it
	must(os.Symlink(top+"/alias/sub", top+"/a2")) // above, through another
	regions := writableRegions([]string{d, top + "/alias/sub/b"})
	if want := []string{d, d + "/sub/b"}; !slices.Equal(regions, want) {
		t.Errorf("regions %q, want %q", regions, want)
	}
	for _, tt := range []struct {
		p, real string
		refused bool
	}{
		{p: d + "/sub/b", real: d + "/sub/b"},
		{p: top + "/alias/sub", real: d + "/sub"},
		{p: top + "/a2/b", real: d + "/sub/b"},
		{p: host, real: host},
		{p: d + "/link", refused: true},
		{p: d + "/link/b", refused: true},
		{p: top + "/alias/link/b", refused: true},
		{p: d + "/rel/b", refused: true},
		{p: d + "/file/x", refused: true},
		{p: d + "/sub/../sub", real: d + "/sub"}, // cleaned before
	} {
		fd, real, _, err := openGrant(tt.p, regions)
		if err == nil {
			unix.Close(fd)
		}
		switch {
		case tt.refused && !errors.Is(err, ErrLinkBelowWritable):
			t.Errorf("%s: %q, %v; want refused", tt.p, real, err)
		case !tt.refused && (err != nil || real != tt.real):
			t.Errorf("%s: %q, %v; want %s", tt.p, real, err, tt.real)
		}
	}
	// Without regions (none writable), links are followed.
	if fd, real, _, err := openGrant(d+"/link/b", nil); err != nil || real != host+"/b" {
		t.Errorf("no writable path: %q, %v", real, err)
	} else {
		unix.Close(fd)
	}
}
