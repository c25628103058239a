package server

import (
	"strings"
	"testing"
)

// scanCases are bodies at the edges of scanBody: syntax, depth, strings
// holding brackets and escapes, white space, trailing data.
var scanCases = []string{
	`{}`, ` {"a":1} ` + "\n", `{"a":"}]{[\"\\"}`, `{"a":"\\"}`, `{"a":"\\\""}`,
	`[]`, `"s"`, `1`, `null`, ``, `   `, `{`, `}`, `{"a":1}{}`, `{"a":1} x`, `{"a":1,}`,
	`{"a":[1,2,{"b":null}]}`, `{"a":1e400}`, `{"a":tru}`, `{'a':1}`, `{"a":"` + "\x01" + `"}`,
	`{"p":` + nested(62) + `}`, `{"p":` + nested(63) + `}`, `{"p":` + nested(64) + `}`,
	`{"p":"` + strings.Repeat("[", 100) + `"}`, `{"p":` + nested(200) + `}`,
}

// TestScanBodyQuickCheckAgrees: the quick check accepts exactly the bodies
// the token scan accepts, so the answers are those of the token scan.
func TestScanBodyQuickCheckAgrees(t *testing.T) {
	t.Parallel()
	for _, c := range scanCases {
		if got, want := wellFormed([]byte(c)), scanTokens([]byte(c)) == nil; got != want {
			t.Errorf("%.80q: quick check %v, token scan accepts %v", c, got, want)
		}
	}
}

// FuzzScanBodyQuickCheck: the quick check and the token scan agree on any
// body.
func FuzzScanBodyQuickCheck(f *testing.F) {
	for _, c := range scanCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if got, want := wellFormed([]byte(body)), scanTokens([]byte(body)) == nil; got != want {
			t.Errorf("%.80q: quick check %v, token scan accepts %v", body, got, want)
		}
	})
}
