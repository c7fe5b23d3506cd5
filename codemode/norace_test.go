//go:build !race

package codemode_test

// residentFactor is how much more memory a process takes under the race
// detector: none without it.
const residentFactor = 1
