//go:build unix

package cli

import (
	"io/fs"
	"syscall"
)

// openNonblock opens a FIFO without waiting for a writer.
const openNonblock = syscall.O_NONBLOCK

// linkCount is the number of names of the file fi describes.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
