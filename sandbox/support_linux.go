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

// isolationProbe runs one command isolated, once: see [Isolation].
var isolationProbe = sync.OnceValue(func() error {
	dir, err := os.MkdirTemp("", "hrns-isolation-probe-")
	if err != nil {
		return fmt.Errorf("no directory for the probe: %w", err)
	}
	defer os.RemoveAll(dir)
	res, err := Run(context.Background(), &Spec{Shell: "exit 0", Dir: dir, Timeout: time.Minute, RequireIsolation: true})
	switch {
	case err != nil:
		return err
	case !res.Confinement.Isolated:
		return fmt.Errorf("%w: the probe was not isolated", ErrNotIsolated)
	}
	return nil
})

// Isolation reports whether this machine isolates commands (see
// [Confinement.Isolated]): nil once a command of this process has run
// isolated, the first call running one (a shell's "exit 0" in a
// temporary directory, with [Spec.RequireIsolation]) if none has; else
// why it does not (the kernel refuses this user the namespaces, or a
// root cannot be built at all here). Where it returns nil, a caller
// should set RequireIsolation on its specs: a command that could not be
// isolated is then refused, not run with less isolation than this
// machine gives the others. Where it does not, [Run] runs commands
// without the namespaces, with a note in their [Result.Confinement];
// that is the only fall-back left to it. A failed probe is not run
// again, but a later isolated run makes Isolation report nil.
func Isolation() error {
	if noIsolation {
		return fmt.Errorf("%w: no PID and mount namespaces (turned off for a test)", ErrNotIsolated)
	}
	if isolatedRun.Load() {
		return nil
	}
	return isolationProbe()
}
