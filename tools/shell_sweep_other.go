//go:build !unix

package tools

// sweepBoxScratches does nothing here: commands are not sandboxed, and no
// shell makes scratch parents.
func sweepBoxScratches() {}
