//go:build !unix

package sqlite

import "os"

// lockFile creates the lock file; without flock, the one-process rule is
// not enforced on this system.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
