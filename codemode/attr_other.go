//go:build !linux

package codemode

import "syscall"

// interpreterAttr: elsewhere the interpreter exits when the parent's end
// of its standard input closes.
func interpreterAttr() *syscall.SysProcAttr { return nil }

// capAddressSpace: the hard bound on the interpreter's memory is
// Linux's only.
func capAddressSpace(int64) {}
