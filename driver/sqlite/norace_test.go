//go:build !race

package sqlite_test

// raceEnabled: the tests run without the race detector.
const raceEnabled = false
