//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Supported reports that this platform cannot confine: Landlock is
// Linux-only.
func Supported() (abi int, err error) {
	return 0, errors.New("the sandbox confines only on Linux (Landlock)")
}

// Isolation reports that this platform cannot isolate commands.
func Isolation() error {
	return fmt.Errorf("%w: the sandbox isolates only on Linux", ErrNotIsolated)
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
	if spec.RequireIsolation {
		return nil, fmt.Errorf("%w: the sandbox isolates only on Linux", ErrNotIsolated)
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
	out, kept := output(spec, max)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if spec.WaitDelay > 0 {
		cmd.WaitDelay = spec.WaitDelay
	}
	start := time.Now()
	err := cmd.Run()
	res := &Result{
		TimedOut:    tctx.Err() != nil,
		OutputHeld:  spec.WaitDelay > 0 && errors.Is(err, exec.ErrWaitDelay),
		Duration:    time.Since(start),
		Confinement: Confinement{Network: "none", Notes: []string{"the sandbox confines only on Linux"}},
	}
	res.Output, res.OutputBytes = kept()
	if spec.AllowNetwork {
		res.Confinement.Network = "allowed"
	}
	ps := cmd.ProcessState
	if ps == nil {
		if err != nil && !res.TimedOut {
			return nil, fmt.Errorf("%w: %w", ErrStart, err)
		}
		return res, nil
	}
	res.ExitCode = ps.ExitCode()
	type signaled interface {
		Signaled() bool
		Signal() syscall.Signal
	}
	if ws, ok := ps.Sys().(signaled); ok && ws.Signaled() {
		res.ExitCode, res.Signal, res.SignalNumber = -1, ws.Signal().String(), int(ws.Signal())
	}
	return res, nil
}
