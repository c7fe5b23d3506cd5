//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"
)

// Supported reports that this platform cannot confine: Landlock is
// Linux-only.
func Supported() (abi int, err error) {
	return 0, errors.New("the sandbox confines only on Linux (Landlock)")
}

// Run runs the command of spec without confinement: on this platform only
// the scrubbed environment, the timeout (which kills the command, not its
// children) and the output cap apply, and the Result says so. With
// RequireConfinement it refuses with [ErrNotConfined].
func Run(ctx context.Context, spec *Spec) (*Result, error) {
	if spec == nil {
		return nil, fmt.Errorf("%w: nil spec", ErrInvalidSpec)
	}
	if spec.RequireConfinement {
		return nil, fmt.Errorf("%w: the sandbox confines only on Linux", ErrNotConfined)
	}
	var argv []string
	switch {
	case len(spec.Command) > 0 && spec.Shell != "":
		return nil, fmt.Errorf("%w: both Command and Shell are set", ErrInvalidSpec)
	case len(spec.Command) > 0:
		argv = spec.Command
	case spec.Shell != "":
		argv = []string{"/bin/sh", "-c", spec.Shell}
	default:
		return nil, fmt.Errorf("%w: no Command or Shell", ErrInvalidSpec)
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("%w: no Dir", ErrInvalidSpec)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	max := spec.MaxOutput
	if max <= 0 {
		max = 64 << 10
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	scratch := ""
	if spec.Scratch != "" {
		scratch, _ = filepath.Abs(spec.Scratch)
	}
	cmd := exec.CommandContext(tctx, argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = environ(spec.Env, scratch)
	cmd.Stdin = spec.Stdin
	out := newCapture(max)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	res := &Result{
		Output:      out.String(),
		OutputBytes: out.Total(),
		TimedOut:    tctx.Err() != nil,
		Duration:    time.Since(start),
		Confinement: Confinement{Network: "none", Notes: []string{"the sandbox confines only on Linux"}},
	}
	if spec.AllowNetwork {
		res.Confinement.Network = "allowed"
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil && !res.TimedOut:
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	return res, nil
}
