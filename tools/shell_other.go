//go:build !unix

package tools

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the command's process; without process groups,
// the processes it started are not reached.
func killProcessGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}

func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }

func signalNote(*os.ProcessState) string { return "" }
