//go:build !linux

package cli

// blankInitialEnvironment does nothing where the kernel shows no other
// process a copy of the environment hrns started with that it could blank.
func blankInitialEnvironment() {}

// closeInheritedOnExec does nothing outside Linux.
func closeInheritedOnExec() {}
