//go:build race

package codemode_test

// residentFactor is how much more memory a process takes under the race
// detector, whose shadow memory grows with the heap (3.3 times, measured
// here, for the dict comprehension of TestMemoryBombs).
const residentFactor = 5
