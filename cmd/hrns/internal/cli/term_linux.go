package cli

import "golang.org/x/sys/unix"

// isTerminal reports whether fd is a terminal: /dev/null, pipes and files
// are not, though /dev/null is a character device too.
func isTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}

// flushInput discards what the terminal at fd received and no one read
// yet (TCIFLUSH), the line being typed included.
func flushInput(fd uintptr) { _ = unix.IoctlSetInt(int(fd), unix.TCFLSH, unix.TCIFLUSH) }
