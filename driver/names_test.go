package driver

import (
	"regexp"
	"strings"
	"testing"
)

// nameRule is the rule ValidName implements, as a regular expression.
var nameRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

var nameCases = []string{
	"", "a", "A9", "9a", "orders", "order.import", "a_b-c:d.e", "_a", "-a", ".a", ":a", "a b", "a/b", "é",
	"a\x00", "a\n", strings.Repeat("a", 128), strings.Repeat("a", 129), "a" + strings.Repeat("-", 127),
}

func TestValidNameFollowsTheRule(t *testing.T) {
	for _, s := range nameCases {
		if got, want := ValidName(s), nameRule.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValidName(f *testing.F) {
	for _, s := range nameCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), nameRule.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	})
}
