package session

import "time"

// SetBeforeRun makes m call f where a worker starts running a session,
// inside the recovery of the session boundary: a test panics there to
// stand for any failure of the runtime while it runs one session. Call it
// before [Manager.Start].
func SetBeforeRun(m *Manager, f func(id string)) { m.beforeRun = f }

// SetBeforeWatch sets a func a worker calls where its watch of the
// session starts, in the watch's goroutine.
func SetBeforeWatch(m *Manager, f func(id string)) { m.beforeWatch = f }

// SetLostDelivery makes m lose the deliveries of child sessions' ends to
// their parents (as a crash at that moment would), and check waiting
// parents' children every d. Call it before [Manager.Start].
func SetLostDelivery(m *Manager, d time.Duration) { m.dropDelivery, m.childCheck = true, d }

// SetChildCheck makes a parent waiting for child sessions on m check them
// every d (a minute otherwise), deliveries kept. Call it before
// [Manager.Start].
func SetChildCheck(m *Manager, d time.Duration) { m.childCheck = d }

// SetAfterChild makes m call f when a run has created a child session of
// parent. Call it before [Manager.Start].
func SetAfterChild(m *Manager, f func(parent string)) { m.afterChild = f }

// SetFlightWaited makes m call f when a woken long-poll waits for a commit
// of the session that is in flight. Call it before [Manager.Start].
func SetFlightWaited(m *Manager, f func(id string)) { m.flightWaited = f }

// Workers returns how many workers run the session with the id here.
func Workers(m *Manager, id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[id]
}

// StatesDecoded returns how many session states the process has decoded.
func StatesDecoded() int64 { return statesDecoded.Load() }

// HandOvers returns how many states callers' inputs handed over to
// workers in the package's tests, and how many of them differed from a
// decoding of their encoding (see handOver).
func HandOvers() (n, differ int) {
	handOvers.Lock()
	defer handOvers.Unlock()
	return handOvers.n, len(handOvers.differ)
}

// SetWorkerIdle sets how long a worker's goroutine waits for the next
// session to run. Call it before [Manager.Start].
func SetWorkerIdle(m *Manager, d time.Duration) { m.workerIdle = d }

// WorkerGoroutines returns how many worker goroutines m started.
func WorkerGoroutines(m *Manager) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.workerGoroutines
}

// HasKeptState reports whether m keeps a decoded state (keptStates) for
// the session with the id, for the encoding it last committed.
func HasKeptState(m *Manager, id string) bool {
	s := m.committed.get(id)
	kept, _, ok := m.kept.lru.get(id)
	return ok && s != nil && len(s.State) > 0 && len(kept.enc) == len(s.State) && &kept.enc[0] == &s.State[0]
}

// ClaimRecoveryTries is how many times the dispatcher asks the store what
// a claim that answered an error took.
const ClaimRecoveryTries = claimRecoveryTries

// StopGrace bounds what Stop still waits for of a store that does not
// answer.
const StopGrace = stopGrace

// Running returns how many workers run here.
func Running(m *Manager) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.workers()
}
