package codemode

import "syscall"

// interpreterAttr puts the interpreter in a process group of its own (a
// terminal's ^C goes to the parent, which stops the program) and has the
// kernel kill it if the parent dies.
func interpreterAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
