package webhook

// StopGrace bounds what Stop still waits for of a claim in flight.
const StopGrace = stopGrace
