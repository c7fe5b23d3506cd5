package codemode

import (
	"os"
	"sync"
	"testing"
)

// An Interpreter is an interpreter process a test saw start.
type Interpreter struct {
	PID int
	// State is its state once waited for; nil while it was not.
	State *os.ProcessState
}

// OnInterpreterStart calls f with each interpreter started, after the
// hook of WatchInterpreters.
func OnInterpreterStart(f func(pid int)) {
	prev := interpreterStarted
	interpreterStarted = func(pid int) {
		if prev != nil {
			prev(pid)
		}
		f(pid)
	}
}

// WatchInterpreters records the interpreter processes started until the
// end of the test; the function returned lists them.
func WatchInterpreters(t testing.TB) func() []Interpreter {
	var mu sync.Mutex
	var seen []Interpreter
	interpreterStarted = func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, Interpreter{PID: pid})
	}
	interpreterExited = func(pid int, state *os.ProcessState) {
		mu.Lock()
		defer mu.Unlock()
		for i := range seen {
			if seen[i].PID == pid {
				seen[i].State = state
			}
		}
	}
	t.Cleanup(func() { interpreterStarted, interpreterExited = nil, nil })
	return func() []Interpreter {
		mu.Lock()
		defer mu.Unlock()
		return append([]Interpreter(nil), seen...)
	}
}
