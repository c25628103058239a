//go:build race

package digest

// raceEnabled: the tests run under the race detector, which makes
// TestCanonicalMatchesSlow's single-goroutine comparison about 30 times
// slower and can find nothing in it.
const raceEnabled = true
