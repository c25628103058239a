//go:build !race

package digest

// raceEnabled: the tests run without the race detector.
const raceEnabled = false
