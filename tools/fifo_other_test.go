//go:build !unix

package tools_test

import "errors"

// mkfifo makes a named pipe at path, where the system has them.
func mkfifo(path string) error { return errors.New("no named pipes here") }
