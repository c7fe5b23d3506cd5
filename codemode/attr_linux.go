package codemode

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// interpreterAttr puts the interpreter in a process group of its own (a
// terminal's ^C goes to the parent, which stops the program) and has the
// kernel kill it if the parent dies.
func interpreterAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// capAddressSpace bounds the interpreter's address space to what it has
// mapped when it starts, plus four times maxMemory and room for the Go
// runtime's reservations. The memory guards stop a program at maxMemory;
// this is the hard bound behind them, for what they do not weigh (the
// text of an error message that quotes a value): past it an allocation
// fails, and the runtime exits with "out of memory".
func capAddressSpace(maxMemory int64) {
	if maxMemory <= 0 {
		return
	}
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return
	}
	size, err := strconv.ParseInt(strings.Fields(string(statm) + " 0")[0], 10, 64)
	if err != nil {
		return
	}
	limit := uint64(size*int64(os.Getpagesize()) + add(mul(4, maxMemory), addressSlack))
	syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit})
}

// addressSlack is the address space left for the runtime on top of four
// times the memory limit: heap arenas are reserved 64 MiB at a time.
const addressSlack = 512 << 20
