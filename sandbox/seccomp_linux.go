package sandbox

import (
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's keyrings are not namespaced by the command's PID, mount or
// network namespaces: a command run by root reaches root's user keyring
// (and user session keyring), the same for every process of root on the
// host and for every later command. It could read the keys host
// processes keep there and leave keys behind for them. The command gets a
// seccomp filter that fails add_key(2), request_key(2) and keyctl(2) with
// EPERM, as container runtimes do; nothing else is filtered.

// seccompArch is one system call convention the command may use: the
// architecture seccomp reports for it and its numbers of the calls denied.
type seccompArch struct {
	arch uint32
	nrs  []uint32
}

// keyringArches are the conventions of this architecture: its own and
// the compatible one its kernel may also run (32-bit, x32).
func keyringArches() []seccompArch {
	switch runtime.GOARCH {
	case "amd64":
		const x32 = 0x40000000 // __X32_SYSCALL_BIT
		return []seccompArch{
			{unix.AUDIT_ARCH_X86_64, []uint32{248, 249, 250, x32 | 248, x32 | 249, x32 | 250}},
			{unix.AUDIT_ARCH_I386, []uint32{286, 287, 288}},
		}
	case "arm64":
		return []seccompArch{
			{unix.AUDIT_ARCH_AARCH64, []uint32{217, 218, 219}},
			{unix.AUDIT_ARCH_ARM, []uint32{309, 310, 311}},
		}
	}
	return nil
}

// keyringFilter is the classic BPF program of the filter: for each
// convention, the calls of arches fail with EPERM; everything else,
// under any convention, is allowed.
func keyringFilter(arches []seccompArch) []unix.SockFilter {
	const (
		load  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		equal = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		// Offsets in struct seccomp_data.
		nrOffset   = 0
		archOffset = 4
	)
	prog := []unix.SockFilter{{Code: load, K: archOffset}}
	var toDeny []int
	for _, a := range arches {
		// Another convention: skip this one's load, tests and allow.
		prog = append(prog, unix.SockFilter{Code: equal, K: a.arch, Jf: uint8(len(a.nrs) + 2)})
		prog = append(prog, unix.SockFilter{Code: load, K: nrOffset})
		for _, nr := range a.nrs {
			toDeny = append(toDeny, len(prog))
			prog = append(prog, unix.SockFilter{Code: equal, K: nr})
		}
		prog = append(prog, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})
	}
	prog = append(prog, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})
	deny := len(prog)
	prog = append(prog, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)})
	for _, i := range toDeny {
		prog[i].Jt = uint8(deny - i - 1)
	}
	return prog
}

// denyKeyrings sets no_new_privs and installs the keyring filter on the
// calling thread alone (the one that starts or becomes the command, locked
// to its goroutine); the command inherits both.
func denyKeyrings() error {
	arches := keyringArches()
	if arches == nil {
		return errors.New("no seccomp filter for " + runtime.GOARCH)
	}
	prog := keyringFilter(arches)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
	runtime.KeepAlive(prog)
	return err
}
