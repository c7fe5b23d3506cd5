package cli

import "golang.org/x/sys/windows"

// isTerminal reports whether fd is a console.
func isTerminal(fd uintptr) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(fd), &mode) == nil
}

// flushInput discards the console's pending input events.
func flushInput(fd uintptr) { _ = windows.FlushConsoleInputBuffer(windows.Handle(fd)) }
