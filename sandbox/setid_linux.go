package sandbox

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// inodeClock reads the clock the kernel stamps inodes with: a file the
// command creates, writes or changes the mode of afterwards has a change
// time (ctime) at or after it, and no process can set a ctime back.
func inodeClock() unix.Timespec {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return unix.Timespec{} // every file counts as changed
	}
	return ts
}

// clearSetID clears the set-user-ID and set-group-ID bits of the regular
// files under dirs that changed at or after since: what a command that
// ran since then left there (as root, a set-user-ID-root shell, inert in
// the sandbox but live outside it). A file of several links loses its
// name here instead: its other names may be outside dirs (a system
// program hard-linked in, where the sandbox allowed the link), whose bits
// are not the command's to clear. It returns the paths it changed.
//
// It runs once every process of the command is gone, so nothing moves the
// files under it; symbolic links are not followed.
func clearSetID(dirs []string, since unix.Timespec) []string {
	var cleared []string
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil // an unreadable directory is skipped
			}
			fi, err := d.Info()
			if err != nil || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok || st.Ctim.Sec < since.Sec || st.Ctim.Sec == since.Sec && st.Ctim.Nsec < since.Nsec {
				return nil
			}
			if clearFile(p) {
				cleared = append(cleared, p)
			}
			return nil
		})
	}
	return cleared
}

// clearFile clears the set-ID bits of the regular file at p, or removes p
// if the file has other names, and reports whether it did.
func clearFile(p string) bool {
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
	// Through the descriptor: the file checked is the file changed.
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o777|st.Mode&unix.S_ISVTX) == nil
}
