//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFdPathSameAsEvalSymlinks: the name the kernel gives a path opened
// with O_PATH, which the first stage binds, is the one
// filepath.EvalSymlinks gave before: over the system paths every command
// may read (symbolic links among them on a merged /usr, /etc/localtime,
// /etc/os-release) and links of every kind made here: relative, absolute,
// chained, to a file, through a linked parent, with .. in the target.
func TestFdPathSameAsEvalSymlinks(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		t.Helper()
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	real := mk("real/sub")
	if err := os.WriteFile(filepath.Join(real, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"rel":          "real/sub",
		"abs":          real,
		"chain":        "rel",
		"tofile":       "real/sub/file",
		"dotdot":       "real/sub/../sub",
		"up/down/back": "../../real",
	}
	mk("up/down")
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	paths := append([]string(nil), systemReadOnly...)
	paths = append(paths, systemReadWrite...)
	for _, p := range []string{"rel", "abs", "chain", "tofile", "dotdot", "up/down/back", "up/down/back/sub/file", "chain/file", "real", "real/sub/file"} {
		paths = append(paths, filepath.Join(dir, p))
	}
	checked := 0
	for _, p := range paths {
		want, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue // a path this machine lacks
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("open %s: %v", p, err)
			continue
		}
		got, err := fdPath(fd)
		unix.Close(fd)
		if err != nil || got != want {
			t.Errorf("%s: the kernel names it %q (%v), EvalSymlinks %q", p, got, err, want)
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("only %d paths checked", checked)
	}
}
