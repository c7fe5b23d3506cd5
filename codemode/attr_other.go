//go:build !linux

package codemode

import "syscall"

// interpreterAttr: elsewhere the interpreter exits when the parent's end
// of its standard input closes.
func interpreterAttr() *syscall.SysProcAttr { return nil }
