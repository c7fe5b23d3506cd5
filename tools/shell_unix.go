//go:build unix

package tools

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup makes the command the leader of a new session, and so of
// a new process group, so that it can be killed with every process it
// starts, and has no controlling terminal: it cannot write to /dev/tty
// past the output capture.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killProcessGroup kills the command's process group.
func killProcessGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return os.ErrProcessDone
	}
	return err
}

// exitCode returns the exit code of a finished process; for one killed by a
// signal, 128 plus the signal's number, as shells report it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalNote says which signal killed a process, if one did.
func signalNote(ps *os.ProcessState) string {
	if ps == nil {
		return ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf(" (killed by signal %d: %v)", int(ws.Signal()), ws.Signal())
	}
	return ""
}
