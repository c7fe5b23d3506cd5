package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

var abiOnce = sync.OnceValues(func() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("the kernel does not offer Landlock: %w", err)
	}
	if v < 1 {
		return 0, errors.New("the kernel does not offer Landlock")
	}
	return v, nil
})

// Supported reports the Landlock ABI version the kernel offers, or why it
// offers none (a kernel before 5.13, or Landlock not enabled at boot). ABI
// 4 adds TCP rules, 6 scoping of signals and abstract Unix sockets. Run
// works either way; see [Result.Confinement] for what a run got.
func Supported() (abi int, err error) { return abiOnce() }

func landlockABI() int {
	v, _ := abiOnce()
	return v
}

// isolatedRun is set once a command of this process has run isolated (or
// a Box's zygote has started so): the machine isolates commands.
var isolatedRun atomic.Bool

// probe is the outcome of isolationProbe, once it has tried the sandbox.
var probe struct {
	sync.Mutex
	done bool
	err  error
}

// isolationProbe runs one command isolated, once: see [Isolation]. A
// failure to make its directory is not kept: the sandbox was not tried.
func isolationProbe() error {
	probe.Lock()
	defer probe.Unlock()
	if probe.done {
		return probe.err
	}
	dir, err := os.MkdirTemp("", "hrns-isolation-probe-")
	if err != nil {
		return fmt.Errorf("%w: no directory for the probe: %w", ErrNotIsolated, err)
	}
	defer os.RemoveAll(dir)
	res, err := Run(context.Background(), &Spec{Shell: "exit 0", Dir: dir, Timeout: time.Minute, RequireIsolation: true})
	switch {
	case err != nil && !errors.Is(err, ErrNotIsolated):
		err = fmt.Errorf("%w: the probe failed: %w", ErrNotIsolated, err)
	case err == nil && !res.Confinement.Isolated:
		err = fmt.Errorf("%w: the probe was not isolated", ErrNotIsolated)
	}
	probe.done, probe.err = true, err
	return err
}

// Isolation reports whether this machine isolates commands (see
// [Confinement.Isolated]): nil once a command of this process has run
// isolated, the first call running one (a shell's "exit 0" in a
// temporary directory, with [Spec.RequireIsolation]) if none has; else
// an error wrapping [ErrNotIsolated] that says why not (the kernel
// refuses this user the namespaces, or no root can be built here).
// Where it returns nil, a caller should set RequireIsolation on its
// specs: a command that cannot be isolated is then refused, not run with
// less isolation than this machine gives the others. Where it does not,
// [Run] runs commands without the namespaces, with a note in their
// [Result.Confinement]: the only fall-back left. A probe that failed is
// not run again (but one that could not make its directory is), and a
// later isolated run makes Isolation report nil.
func Isolation() error {
	if noIsolation {
		return fmt.Errorf("%w: no PID and mount namespaces (turned off for a test)", ErrNotIsolated)
	}
	if isolatedRun.Load() {
		return nil
	}
	return isolationProbe()
}
