package sandbox

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeOnExecFrom marks every open descriptor from first up close-on-exec,
// so that none reaches the program this process executes next: not those
// whoever started hrns left open (a file the command could not open
// itself, a socket), whatever their number. The Go runtime opens its own
// close-on-exec already; descriptors are marked rather than closed, since
// some of this process's may be the runtime's.
func closeOnExecFrom(first int) error {
	err := unix.CloseRange(uint(first), math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11: each descriptor /proc lists.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %v; listing the open descriptors: %w", err, rerr)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < first {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return fmt.Errorf("descriptor %d: %w", fd, err)
		}
	}
	return nil
}
