package tools_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

// newWorkspace makes a workspace beside a directory outside it, which
// holds a secret.
func newWorkspace(t testing.TB) (w *tools.Workspace, dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{dir, outside, filepath.Join(dir, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(outside, "secret"), "the key")
	write(t, filepath.Join(dir, "notes.txt"), "hello")
	w, err := tools.OpenWorkspace(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, dir, outside
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWorkspaceHostilePaths: every way out of the workspace, and every
// file that is not a plain file of its own, is refused by reads and
// writes alike, with an error errors.Is classifies, that never names the
// host's directories; nothing outside changes.
func TestWorkspaceHostilePaths(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links and FIFOs")
	}
	w, dir, outside := newWorkspace(t)
	secret := filepath.Join(outside, "secret")
	must(t, os.Symlink(outside, filepath.Join(dir, "link-out")))
	must(t, os.Symlink(secret, filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("../outside/secret", filepath.Join(dir, "rel-link")))
	must(t, os.Link(secret, filepath.Join(dir, "hard")))
	must(t, mkfifo(filepath.Join(dir, "fifo")))
	big := filepath.Join(dir, "huge.bin")
	f, err := os.Create(big)
	must(t, err)
	must(t, f.Truncate(1<<40)) // sparse: a terabyte that takes no disk
	f.Close()

	for _, tc := range []struct {
		path      string
		want      error
		writeWant error // when writing fails otherwise (0: as reading)
	}{
		{"../outside/secret", tools.ErrOutside, nil},
		{"sub/../../outside/secret", tools.ErrOutside, nil},
		{"..", tools.ErrOutside, nil},
		{secret, tools.ErrBadPath, nil},
		{"/etc/passwd", tools.ErrBadPath, nil},
		{`\etc\passwd`, tools.ErrBadPath, nil},
		{"C:/Windows", tools.ErrBadPath, nil},
		{"", tools.ErrBadPath, nil},
		{"a\x00b", tools.ErrBadPath, nil},
		{"bad-\xff-name", tools.ErrBadPath, nil},
		{strings.Repeat("a/", 3000), tools.ErrBadPath, nil},
		{"link-out/secret", tools.ErrOutside, nil},
		{"abs-link", tools.ErrOutside, nil},
		{"rel-link", tools.ErrOutside, nil},
		{"hard", tools.ErrHardLinks, nil},
		{"fifo", tools.ErrNotRegular, nil},
		{"sub", tools.ErrNotRegular, nil},
		{".", tools.ErrNotRegular, nil},
		{"missing.txt", fs.ErrNotExist, errNone},
		{"huge.bin", tools.ErrTooLarge, errNone},
	} {
		_, _, err := w.ReadFile(tc.path, 10<<20)
		if !errors.Is(err, tc.want) {
			t.Errorf("ReadFile(%q) = %v, want %v", tc.path, err, tc.want)
		}
		checkNoHostPath(t, err, dir)
		want := tc.want
		if tc.writeWant != nil {
			want = tc.writeWant
		}
		err = w.WriteFile(tc.path, []byte("overwritten"))
		if want == errNone {
			if err != nil {
				t.Errorf("WriteFile(%q) = %v", tc.path, err)
			}
		} else if !errors.Is(err, want) {
			t.Errorf("WriteFile(%q) = %v, want %v", tc.path, err, want)
		}
		checkNoHostPath(t, err, dir)
	}
	if b, _ := os.ReadFile(secret); string(b) != "the key" {
		t.Errorf("the file outside holds %q after the writes", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "overwritten")); err == nil {
		t.Error("a file was created outside")
	}
}

// errNone marks a case whose write succeeds.
var errNone = errors.New("no error")

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func checkNoHostPath(t *testing.T, err error, dir string) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), dir) {
		t.Errorf("error %q names the workspace's place on the host", err)
	}
}

// TestWorkspaceSwapRace: a symbolic link or a FIFO swapped in between the
// look at a path and its opening is refused on the opened file.
func TestWorkspaceSwapRace(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links and FIFOs")
	}
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, path, outside string)
		want error
	}{
		{"symlink", func(t *testing.T, path, outside string) {
			must(t, os.Remove(path))
			must(t, os.Symlink(filepath.Join(outside, "secret"), path))
		}, tools.ErrOutside},
		{"relative symlink", func(t *testing.T, path, outside string) {
			must(t, os.Remove(path))
			must(t, os.Symlink("../outside/secret", path))
		}, tools.ErrOutside},
		{"fifo", func(t *testing.T, path, outside string) {
			must(t, os.Remove(path))
			must(t, mkfifo(path))
		}, tools.ErrNotRegular},
	} {
		for _, op := range []string{"read", "write"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				w, dir, outside := newWorkspace(t)
				target := filepath.Join(dir, "notes.txt")
				swapped := false
				tools.SetBeforeOpen(t, func(rel string) {
					if rel == "notes.txt" && !swapped {
						swapped = true
						tc.swap(t, target, outside)
					}
				})
				var err error
				if op == "read" {
					var b []byte
					b, _, err = w.ReadFile("notes.txt", 1<<20)
					if strings.Contains(string(b), "the key") {
						t.Error("read the secret through the swapped link")
					}
				} else {
					err = w.WriteFile("notes.txt", []byte("overwritten"))
				}
				if !swapped {
					t.Fatal("the hook never ran")
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("%s after the swap = %v, want %v", op, err, tc.want)
				}
				if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "the key" {
					t.Errorf("the secret holds %q", b)
				}
			})
		}
	}
}

// TestWorkspaceReadWriteList: what is written is read back and listed;
// parents are made; names that are not UTF-8 are left out of listings;
// a link to a directory inside is marked a directory, and links out are
// not followed.
func TestWorkspaceReadWriteList(t *testing.T) {
	w, dir, outside := newWorkspace(t)
	data := []byte{0, 1, 2, 0xff, 'x'}
	must(t, w.WriteFile("out/report.bin", data))
	b, info, err := w.ReadFile("out/report.bin", 5)
	if err != nil || !slices.Equal(b, data) || info.Size() != 5 {
		t.Fatalf("ReadFile = %v, %v, %v", b, info, err)
	}
	if _, _, err := w.ReadFile("out/report.bin", 4); !errors.Is(err, tools.ErrTooLarge) {
		t.Errorf("ReadFile over the limit = %v, want ErrTooLarge", err)
	}
	// Replacing truncates.
	must(t, w.WriteFile("out/report.bin", []byte("ok")))
	if b, _, _ := w.ReadFile("out/report.bin", 10); string(b) != "ok" {
		t.Errorf("after the rewrite: %q", b)
	}
	if runtime.GOOS != "windows" {
		must(t, os.WriteFile(filepath.Join(dir, "bad-\xff"), nil, 0o644))
		must(t, os.Symlink("sub", filepath.Join(dir, "sub-link")))
		must(t, os.Symlink(outside, filepath.Join(dir, "link-out")))
		must(t, mkfifo(filepath.Join(dir, "fifo")))
	}
	entries, complete, err := w.List(t.Context(), "")
	if err != nil || !complete {
		t.Fatalf("List = %v, %v", complete, err)
	}
	got := map[string]bool{}
	for _, e := range entries {
		got[e.Path] = e.IsDir
	}
	want := map[string]bool{"notes.txt": false, "sub": true, "out": true}
	if runtime.GOOS != "windows" {
		want["sub-link"], want["link-out"], want["fifo"] = true, false, false
	}
	if len(got) != len(want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	for p, d := range want {
		if isDir, ok := got[p]; !ok || isDir != d {
			t.Errorf("entry %s: listed %v, dir %v; want dir %v", p, ok, isDir, d)
		}
	}
	sub, _, err := w.List(t.Context(), "out")
	if err != nil || len(sub) != 1 || sub[0].Path != "out/report.bin" || sub[0].Name != "report.bin" || sub[0].Size != 2 {
		t.Errorf("List(out) = %+v, %v", sub, err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{
		{"notes.txt", tools.ErrNotDir},
		{"missing", fs.ErrNotExist},
		{"../outside", tools.ErrOutside},
		{"/", tools.ErrBadPath},
	} {
		if _, _, err := w.List(t.Context(), tc.path); !errors.Is(err, tc.want) {
			t.Errorf("List(%q) = %v, want %v", tc.path, err, tc.want)
		}
	}
	if runtime.GOOS != "windows" {
		for _, p := range []string{"link-out", "fifo"} {
			if _, _, err := w.List(t.Context(), p); err == nil {
				t.Errorf("List(%q) succeeded", p)
			}
		}
	}
}

// FuzzWorkspacePath: whatever path a caller gives, reads, writes and
// listings stay inside the workspace: the directory outside keeps its one
// file, unchanged, and nothing panics.
func FuzzWorkspacePath(f *testing.F) {
	for _, p := range []string{"a.txt", "../outside/secret", "link-out/x", "sub/../../outside/new", "/etc/passwd", "~/x", ".", "..", "a/./b//c", "link-out", "rel-link", "\x00", "\xff", "sub/link-out/../secret", strings.Repeat("../", 50) + "x"} {
		f.Add(p)
	}
	w, dir, outside := newWorkspace(f)
	os.Symlink(outside, filepath.Join(dir, "link-out"))
	os.Symlink("../outside/secret", filepath.Join(dir, "rel-link"))
	f.Fuzz(func(t *testing.T, p string) {
		w.ReadFile(p, 1<<20)
		w.WriteFile(p, []byte("fuzz"))
		w.List(t.Context(), p)
		entries, err := os.ReadDir(outside)
		if err != nil || len(entries) != 1 || entries[0].Name() != "secret" {
			t.Fatalf("after %q the directory outside holds %v (%v)", p, entries, err)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "the key" {
			t.Fatalf("after %q the secret holds %q", p, b)
		}
	})
}
