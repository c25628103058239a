package digest

import (
	"strings"
	"testing"
)

func TestCanonicalSortsKeysAndKeepsNumbers(t *testing.T) {
	a, err := Canonical([]byte(`{"b": 1.50, "a": [1, {"z": 2, "y": "<x>"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(a), `{"a":[1,{"y":"<x>","z":2}],"b":1.50}`; got != want {
		t.Fatalf("canonical = %s, want %s", got, want)
	}
	b, _ := Canonical([]byte(`{"a":[1,{"y":"<x>","z":2}],  "b":1.50}`))
	if Sum(a) != Sum(b) || UniqueKey("t", "k", a) != UniqueKey("t", "k", b) {
		t.Fatal("equal content must give equal digests and keys")
	}
	if UniqueKey("t", "k", a) == UniqueKey("t", "k2", a) || UniqueKey("t", "k", a) == UniqueKey("t2", "k", a) {
		t.Fatal("natural key and type must change the key")
	}
}

func TestCanonicalRejectsBadJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `nope`, `{} {}`, strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)} {
		if _, err := Canonical([]byte(in)); err == nil {
			t.Errorf("Canonical(%q) accepted bad input", in)
		}
	}
}
