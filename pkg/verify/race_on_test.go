//go:build race

package verify_test

// raceEnabled shortens the long streaming tests: the race detector makes them
// ~15x slower without finding more.
const raceEnabled = true
