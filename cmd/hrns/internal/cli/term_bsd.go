//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package cli

import "golang.org/x/sys/unix"

// isTerminal reports whether fd is a terminal: /dev/null, pipes and files
// are not, though /dev/null is a character device too.
func isTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TIOCGETA)
	return err == nil
}

// flushInput discards what the terminal at fd received and no one read
// yet, the line being typed included.
func flushInput(fd uintptr) { _ = unix.IoctlSetPointerInt(int(fd), unix.TIOCFLUSH, unix.FREAD) }
