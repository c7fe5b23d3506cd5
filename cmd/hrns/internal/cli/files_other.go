//go:build !unix

package cli

import "io/fs"

// openNonblock is 0 where FIFOs do not block an open.
const openNonblock = 0

// linkCount is 1 where hrns cannot count a file's names.
func linkCount(fs.FileInfo) uint64 { return 1 }
