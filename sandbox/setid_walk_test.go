//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// clearSetIDWalkDir is clearSetID as it was, by filepath.WalkDir and a
// stat by full path of each file: the reference the walk by descriptors
// must match.
func clearSetIDWalkDir(dirs []string, since unix.Timespec) []string {
	var cleared []string
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			fi, err := d.Info()
			if err != nil || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok || st.Ctim.Sec < since.Sec || st.Ctim.Sec == since.Sec && st.Ctim.Nsec < since.Nsec {
				return nil
			}
			if clearFileWalkDir(p) {
				cleared = append(cleared, p)
			}
			return nil
		})
	}
	return cleared
}

func clearFileWalkDir(p string) bool {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
		return false
	}
	if st.Nlink > 1 {
		err := unix.Unlink(p)
		return err == nil || errors.Is(err, fs.ErrNotExist)
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o777|st.Mode&unix.S_ISVTX) == nil
}

// makeSetIDTree fills root with a tree drawn from seed: directories (some
// set-group-ID, one unreadable), regular files of every set-ID mode, hard
// links (inside the tree and to a file outside it, in out), symbolic
// links to set-ID files and to directories (inside and out), a FIFO and
// names that sort differently as bytes and as text.
func makeSetIDTree(t *testing.T, root, out string, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(out, "outside-suid")
	must(os.WriteFile(outside, []byte("x"), 0o755))
	must(os.Chmod(outside, 0o755|os.ModeSetuid))
	modes := []os.FileMode{0o644, 0o755, 0o755 | os.ModeSetuid, 0o755 | os.ModeSetgid, 0o755 | os.ModeSetuid | os.ModeSetgid, 0o4000 | os.ModeSticky}
	names := []string{"a", "B", "b", "z", "é", "a b", ".hidden", "-dash", "x.go", "Z9", "10", "9"}
	dirs := []string{root}
	var files []string
	for i := range 120 {
		parent := dirs[r.IntN(len(dirs))]
		name := names[r.IntN(len(names))] + strconv.Itoa(i)
		p := filepath.Join(parent, name)
		switch k := r.IntN(10); {
		case k < 2:
			mode := os.FileMode(0o755)
			if r.IntN(4) == 0 {
				mode |= os.ModeSetgid
			}
			must(os.Mkdir(p, 0o755))
			must(os.Chmod(p, mode))
			dirs = append(dirs, p)
		case k < 7:
			must(os.WriteFile(p, []byte("x"), 0o644))
			must(os.Chmod(p, modes[r.IntN(len(modes))]))
			files = append(files, p)
		case k == 7 && len(files) > 0:
			if r.IntN(2) == 0 {
				must(os.Link(files[r.IntN(len(files))], p))
			} else {
				must(os.Link(outside, p))
			}
		case k == 8:
			targets := append([]string{outside, out}, files...)
			must(os.Symlink(targets[r.IntN(len(targets))], p))
		default:
			must(unix.Mkfifo(p, 0o644))
		}
	}
	locked := filepath.Join(root, "locked")
	must(os.Mkdir(locked, 0o755))
	must(os.WriteFile(filepath.Join(locked, "in"), []byte("x"), 0o755))
	must(os.Chmod(filepath.Join(locked, "in"), 0o755|os.ModeSetuid))
	must(os.Chmod(locked, 0))
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
}

// treeState is every path under root, with its mode and link count.
func treeState(t *testing.T, root string) []string {
	t.Helper()
	var state []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		state = append(state, fmt.Sprintf("%s %v %d", rel, fi.Mode(), fi.Sys().(*syscall.Stat_t).Nlink))
		return nil
	})
	return state
}

// TestClearSetIDSameAsWalkDir: the walk by descriptors clears and removes
// what the walk by filepath.WalkDir did, reports the same paths in the
// same order, and leaves the same tree, over trees of every kind of file,
// as a directory or file root, through symbolic links (not followed) and
// with a since that only some files passed.
func TestClearSetIDSameAsWalkDir(t *testing.T) {
	if os.Geteuid() != 0 {
		// Another user may not make set-group-ID files of groups it
		// is not in, and cannot read the unreadable directory either
		// way; the walk is root's.
		t.Skip("clearing set-ID bits is done for root")
	}
	defer func(n int) { maxHeldDirs = n }(maxHeldDirs)
	for seed := range uint64(12) {
		// Some walks hold no directory but the one they read, or two.
		maxHeldDirs = []int{64, 0, 1, 2}[seed%4]
		t.Run(fmt.Sprintf("%d-held%d", seed, maxHeldDirs), func(t *testing.T) {
			base := t.TempDir()
			var roots [2][]string
			var since [2]unix.Timespec
			for i := range 2 {
				root := filepath.Join(base, strconv.Itoa(i), "work")
				out := filepath.Join(base, strconv.Itoa(i), "out")
				for _, d := range []string{root, out} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				makeSetIDTree(t, root, out, seed)
				since[i] = inodeClock()
				if seed%3 == 1 {
					// Files made before since are not the
					// command's: only a later change counts.
					waitPastClock(t, root)
					since[i] = inodeClock()
					touchSome(t, root, seed)
				}
				roots[i] = []string{root, out + "/outside-suid", filepath.Join(base, "missing"), filepath.Join(base, strconv.Itoa(i))}
				if seed%4 == 2 {
					link := filepath.Join(base, strconv.Itoa(i), "link-to-work")
					if err := os.Symlink(root, link); err != nil {
						t.Fatal(err)
					}
					roots[i] = append(roots[i], link)
				}
			}
			switch {
			case seed%3 == 1:
				// since as taken: only the touched files count.
			case seed%6 == 5:
				since = [2]unix.Timespec{{Sec: 1 << 62}, {Sec: 1 << 62}} // none
			default:
				since = [2]unix.Timespec{} // all
			}
			want := clearSetIDWalkDir(roots[0], since[0])
			got := clearSetID(roots[1], since[1])
			rel := func(base string, ps []string) []string {
				var r []string
				for _, p := range ps {
					x, _ := filepath.Rel(base, p)
					r = append(r, x)
				}
				return r
			}
			w0, g1 := rel(filepath.Join(base, "0"), want), rel(filepath.Join(base, "1"), got)
			if !slices.Equal(w0, g1) {
				t.Errorf("cleared:\n got %q\nwant %q", g1, w0)
			}
			if len(want) == 0 && seed%6 != 5 {
				t.Errorf("the tree had nothing to clear: the test tests nothing")
			}
			s0, s1 := treeState(t, filepath.Join(base, "0")), treeState(t, filepath.Join(base, "1"))
			if !slices.Equal(s0, s1) {
				t.Errorf("the trees differ after the walks:\n got %q\nwant %q", s1, s0)
			}
		})
	}
}

// waitPastClock waits until the coarse inode clock is past every change
// time under root.
func waitPastClock(t *testing.T, root string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		now := inodeClock()
		newest := int64(0)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			var st unix.Stat_t
			if err == nil && unix.Lstat(p, &st) == nil {
				newest = max(newest, st.Ctim.Nano())
			}
			return nil
		})
		if now.Nano() > newest {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the coarse clock does not move")
		}
		runtime.Gosched()
	}
}

// touchSome changes the mode of some of the set-ID files under root (as
// a command would), drawn from seed alike in both trees.
func touchSome(t *testing.T, root string, seed uint64) {
	t.Helper()
	var ps []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			ps = append(ps, p)
		}
		return nil
	})
	r := rand.New(rand.NewPCG(seed, 7))
	for _, p := range ps {
		if r.IntN(2) == 0 {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClearSetIDDeep: a set-user-ID file whose path is longer than
// PATH_MAX, which a command can make by descending a directory at a time,
// loses its bits. The walk by filepath.WalkDir could not stat it, and
// left it set-user-ID.
func TestClearSetIDDeep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("clearing set-ID bits is done for root")
	}
	for _, walk := range []struct {
		name  string
		clear func([]string, unix.Timespec) []string
		fixed bool
	}{{"descriptors", clearSetID, true}, {"walkdir", clearSetIDWalkDir, false}} {
		t.Run(walk.name, func(t *testing.T) {
			root := t.TempDir()
			fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			seg := strings.Repeat("d", 200)
			depth := 0
			for ; depth*(len(seg)+1) <= unix.PathMax+len(seg); depth++ {
				if err := unix.Mkdirat(fd, seg, 0o755); err != nil {
					t.Fatal(err)
				}
				sub, err := unix.Openat(fd, seg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				unix.Close(fd)
				if err != nil {
					t.Fatal(err)
				}
				fd = sub
			}
			defer unix.Close(fd)
			since := inodeClock()
			f, err := unix.Openat(fd, "rootsh", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(f)
			if err := unix.Fchmodat(fd, "rootsh", 0o4755, 0); err != nil {
				t.Fatal(err)
			}
			cleared := walk.clear([]string{root}, since)
			var st unix.Stat_t
			if err := unix.Fstatat(fd, "rootsh", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				t.Fatal(err)
			}
			left := st.Mode&unix.S_ISUID != 0
			if walk.fixed && (left || len(cleared) != 1 || len(cleared[0]) <= unix.PathMax) {
				t.Errorf("%d deep: the file is left set-user-ID: %v; cleared %d paths", depth, left, len(cleared))
			}
			if !walk.fixed && !left {
				t.Errorf("the walk by filepath.WalkDir cleared a file deeper than PATH_MAX: the test no longer shows the defect")
			}
			// t.TempDir's removal cannot reach that deep either.
			for range depth {
				unix.Unlinkat(fd, "rootsh", 0)
				up, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					break
				}
				unix.Close(fd)
				fd = up
				unix.Unlinkat(fd, seg, unix.AT_REMOVEDIR)
			}
		})
	}
}

// BenchmarkClearSetID walks GOROOT/src (about 11,000 files, none set-ID;
// HRNS_SETID_BENCH_DIR for another tree) as Run does after each command
// run by root, by descriptors and, for comparison, by filepath.WalkDir,
// and reports the CPU of one walk.
func BenchmarkClearSetID(b *testing.B) {
	dir := os.Getenv("HRNS_SETID_BENCH_DIR")
	if dir == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Skip("no go command to find GOROOT, and no HRNS_SETID_BENCH_DIR")
		}
		dir = strings.TrimSpace(string(out)) + "/src"
	}
	for _, bc := range []struct {
		name  string
		clear func([]string, unix.Timespec) []string
	}{{"descriptors", clearSetID}, {"walkdir", clearSetIDWalkDir}} {
		b.Run(bc.name, func(b *testing.B) {
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for b.Loop() {
				bc.clear([]string{dir}, unix.Timespec{Sec: 1 << 62})
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
