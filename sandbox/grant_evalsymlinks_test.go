//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenGrantSameAsEvalSymlinks: where no writable path is on the
// way, the real path openGrant gives a grant (where the first stage binds
// it), and the name the kernel gives its descriptor, are the one
// filepath.EvalSymlinks gave before: over the system paths every command
// may read (symbolic links among them on a merged /usr, /etc/localtime,
// /etc/os-release) and links of every kind made here: relative, absolute,
// chained, to a file, through a linked parent, with .. in the target.
func TestOpenGrantSameAsEvalSymlinks(t *testing.T) {
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
		fd, real, _, err := openGrant(p, nil)
		if err != nil {
			t.Errorf("openGrant %s: %v", p, err)
			continue
		}
		got, err := fdPath(fd)
		unix.Close(fd)
		if err != nil || got != want || real != want {
			t.Errorf("%s: openGrant gives %q, the kernel names it %q (%v), EvalSymlinks %q", p, real, got, err, want)
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("only %d paths checked", checked)
	}
}

// fdPath is the path of the file open at fd, as the kernel names it in
// /proc/self/fd: absolute, every symbolic link resolved.
func fdPath(fd int) (string, error) {
	link := "/proc/self/fd/" + strconv.Itoa(fd)
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlink(link, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: link, Err: err}
		}
		if n < size {
			p := string(buf[:n])
			if !strings.HasPrefix(p, "/") {
				return "", fmt.Errorf("%s names no path: %q", link, p)
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: the path is too long", link)
}
