// Package shorten cuts text that keel repeats back (caller input in an
// error, a handler's error in the task history) to a bounded size.
package shorten

import "unicode/utf8"

// String cuts s to at most n bytes at a rune boundary and marks the cut
// with "…"; a string that fits is returned as it is.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
