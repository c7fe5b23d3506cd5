//go:build unix

package tools

import (
	"errors"
	"io/fs"
	"syscall"
)

// openNonblock is added to the flags of every file the file tools open:
// opening a FIFO then returns at once instead of waiting for the other
// end (the file is checked, through the handle, before it is used).
const openNonblock = syscall.O_NONBLOCK

// linkCount returns the number of hard links of the file info describes,
// or 1 where the system does not say.
func linkCount(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// isNoReader reports an error of opening a FIFO to write, non-blocking,
// while nothing reads it.
func isNoReader(err error) bool { return errors.Is(err, syscall.ENXIO) }
