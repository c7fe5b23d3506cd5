//go:build linux

package sandbox

// SetNoNetns turns network namespaces off (or back on) for a test.
func SetNoNetns(b bool) { noNetns = b }

// SetNoIsolation turns the PID and mount namespaces off (or back on) for a
// test.
func SetNoIsolation(b bool) { noIsolation = b }
