package sandbox

import (
	"errors"
	"fmt"
	"sync"

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
