package sqlite_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestCommitsSyncWithFdatasync runs the store in a process where fsync(2)
// fails (a seccomp filter on every thread): creating a store, a session
// and committing a change must still work, each commit synced with
// fdatasync(2) (which the filter allows), so none of them called fsync.
// With synchronous = FULL and the library's default (fsync), the first
// commit, Open's migration, fails with a disk I/O error.
func TestCommitsSyncWithFdatasync(t *testing.T) {
	if os.Getenv("HRNS_TEST_FSYNC_DENIED") == "1" {
		commitWithoutFsync(t)
		return
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no seccomp filter here for", runtime.GOARCH)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitsSyncWithFdatasync$", "-test.v")
	cmd.Env = append(os.Environ(), "HRNS_TEST_FSYNC_DENIED=1", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the store failed in a process where fsync fails: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// commitWithoutFsync denies fsync to this process, then opens a store and
// commits to it.
func commitWithoutFsync(t *testing.T) {
	if err := denyFsync(); err != nil {
		t.Skip("cannot install a seccomp filter here:", err)
	}
	// The filter holds: a plain fsync fails.
	f, err := os.Create(filepath.Join(t.TempDir(), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err == nil {
		t.Fatal("fsync succeeded under the filter that denies it")
	}
	f.Close()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	s, _, err := st.CreateSession(ctx, &store.Session{ID: "s1", Owner: "o", Status: "pending", Agent: "a", State: []byte(`{}`), CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Status = "running"
	if err := st.UpdateSession(ctx, s, []store.Event{{Type: "e", Data: []byte(`{}`)}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, n, err := st.EventCount(ctx, "s1"); err != nil || n != 1 {
		t.Fatalf("event count %d, %v; want 1", n, err)
	}
}

// denyFsync makes fsync(2) fail with EPERM on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC); every other call, fdatasync(2) included, is
// allowed.
func denyFsync() error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	}
	const (
		load  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		equal = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
	)
	prog := []unix.SockFilter{
		{Code: load, K: 4},                   // the architecture
		{Code: equal, K: arch, Jt: 0, Jf: 3}, // another one: allow
		{Code: load, K: 0},                   // the call's number
		{Code: equal, K: unix.SYS_FSYNC, Jt: 0, Jf: 1},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return errno
	}
	return nil
}
