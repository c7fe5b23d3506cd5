package schedule

// StopGrace bounds what the worker still waits for of the store once its
// context ends.
const StopGrace = stopGrace
