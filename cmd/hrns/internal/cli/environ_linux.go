package cli

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// blankInitialEnvironment overwrites, with zeros, the environment the
// process was started with, where the kernel keeps it (between env_start
// and env_end of /proc/self/stat) and shows it in /proc/PID/environ: the Go
// runtime made its own copy at start, and unsetting a variable does not
// touch this one. It does nothing where the area cannot be found or
// written.
func blankInitialEnvironment() {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return
	}
	// The fields after the command's name, which may hold spaces and
	// parentheses: env_start and env_end are the 50th and 51st fields.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 > len(stat) {
		return
	}
	f := strings.Fields(string(stat[i+2:]))
	if len(f) < 51-2 {
		return
	}
	start, err1 := strconv.ParseUint(f[50-3], 10, 64)
	end, err2 := strconv.ParseUint(f[51-3], 10, 64)
	if err1 != nil || err2 != nil || end <= start || end-start > 64<<20 || start > math.MaxInt64 {
		return
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer mem.Close()
	_, _ = mem.WriteAt(make([]byte, end-start), int64(start))
}

// closeInheritedOnExec marks every descriptor from 3 up close-on-exec.
func closeInheritedOnExec() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= 3 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
