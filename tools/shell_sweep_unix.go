//go:build unix

package tools

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sweepBoxScratches removes the scratch parents of shells whose process
// is gone (no process has the pid in the name): a process that exits
// leaves its shells' (their helpers' directories, emptied after each
// command). One whose pid a live process has taken since is kept.
func sweepBoxScratches() {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), boxScratchPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}
