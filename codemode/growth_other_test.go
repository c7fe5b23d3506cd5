//go:build !linux

package codemode_test

import "testing"

// interpreterGrowth runs f; the interpreter's peak resident size is read
// on Linux only, so elsewhere it reports no growth.
func interpreterGrowth(t *testing.T, f func()) int64 {
	t.Helper()
	f()
	t.Log("the interpreter's size is measured on Linux only")
	return 0
}
