package session

// SetBeforeRun makes m call f where a worker starts running a session,
// inside the recovery of the session boundary: a test panics there to
// stand for any failure of the runtime while it runs one session. Call it
// before [Manager.Start].
func SetBeforeRun(m *Manager, f func(id string)) { m.beforeRun = f }
