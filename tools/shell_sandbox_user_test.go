//go:build linux

package tools_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
)

// TestSandboxAsUser runs run_command's tests of the kept helper as
// another user (nobody, in a copy of this test binary): run_command keeps
// the sandbox's helper between commands for every user where the kernel
// gives it user namespaces, not for root alone.
func TestSandboxAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run as root: it runs these tests as another user (as that user, they run here)")
	}
	needLandlock(t)
	const nobody = 65534
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hrns-tools-user-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	home := filepath.Join(dir, "home")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "tools.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^(TestSandboxHelperKept|TestSandboxSweepsStaleScratch|TestSandboxWrites)$", "-test.v", "-test.count=1")
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + home, "HOME=" + home}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	out, err := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("commands are not isolated here")) {
		t.Skipf("the kernel does not isolate another user's commands:\n%s", out)
	}
	if err != nil {
		t.Fatalf("as user %d: %v\n%s", nobody, err, out)
	}
	for _, name := range []string{"TestSandboxHelperKept", "TestSandboxSweepsStaleScratch", "TestSandboxWrites"} {
		if !regexp.MustCompile(`(?m)^\s*--- PASS: ` + name + ` `).Match(out) {
			t.Errorf("%s did not pass as user %d", name, nobody)
		}
	}
	if t.Failed() {
		t.Logf("%s", out)
	}
}
