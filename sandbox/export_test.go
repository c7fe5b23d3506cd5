//go:build linux

package sandbox

// SetNoNetns turns network namespaces off (or back on) for a test.
func SetNoNetns(b bool) { noNetns = b }
