//go:build race

package sqlite_test

// raceEnabled: the tests run under the race detector, which makes every
// write several times slower.
const raceEnabled = true
