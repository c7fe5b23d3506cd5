package session

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/store"
)

// handOvers counts the states handed over to a worker in the package's
// tests, and keeps those that differ from a decoding of their encoding.
var handOvers struct {
	sync.Mutex
	n      int
	differ []string
}

// TestMain checks, in every test of the package, each state a caller's
// input hands over to the worker it claims (see handOver) against a
// decoding of the state's encoding: the run must be the same either way.
// Not when benchmarks run: they count the decodes.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		handOverCheck = checkHandOver
	}
	code := m.Run()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "%d states handed over to a worker, checked\n", handOvers.n)
	}
	if len(handOvers.differ) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d of %d states handed over to a worker differ from their encoding decoded:\n", len(handOvers.differ), handOvers.n)
		for i, d := range handOvers.differ {
			if i == 5 {
				break
			}
			fmt.Fprintln(os.Stderr, d)
		}
		code = 1
	}
	os.Exit(code)
}

func checkHandOver(s *store.Session, st *state) {
	d, err := decodeState(s)
	handOvers.Lock()
	defer handOvers.Unlock()
	handOvers.n++
	switch {
	case err != nil:
		handOvers.differ = append(handOvers.differ, fmt.Sprintf("session %s: %v", s.ID, err))
	case !reflect.DeepEqual(st, d):
		handOvers.differ = append(handOvers.differ, fmt.Sprintf("session %s:\nhanded  %#v\ndecoded %#v", s.ID, *st, *d))
	}
}
