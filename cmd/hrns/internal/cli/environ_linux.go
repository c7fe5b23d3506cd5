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
	// Plain system calls, not os.File: an os.File of a /proc file joins
	// the runtime's poller, whose first use sets it up (epoll, an eventfd,
	// four fcntl and two epoll_ctl calls), which a command that never
	// touches the network would pay for this alone.
	var buf [1024]byte // /proc/self/stat is about 300 bytes
	n := readProcFile("/proc/self/stat", buf[:])
	if n <= 0 || n == len(buf) {
		return
	}
	stat := buf[:n]
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
	fd, err := unix.Open("/proc/self/mem", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	zeros := make([]byte, end-start)
	for off := 0; off < len(zeros); {
		n, err := unix.Pwrite(fd, zeros[off:], int64(start)+int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		off += n
	}
}

// readProcFile reads the file at path into buf with plain system calls
// and returns how many bytes it read, or -1 where it could not be read.
func readProcFile(path string, buf []byte) int {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n
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
