//go:build !unix

package tools

import "io/fs"

const openNonblock = 0

func linkCount(fs.FileInfo) uint64 { return 1 }

func isNoReader(error) bool { return false }
