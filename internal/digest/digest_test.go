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

// TestCanonicalRefusesWhatCannotBeStoredAsSent: input that a database
// would refuse, or that would be stored changed, is an error naming the
// payload, on every database alike.
func TestCanonicalRefusesWhatCannotBeStoredAsSent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"x\u0000y"}`, "NUL"},
		{`{"a\u0000":1}`, "NUL"},
		{`["\u0000"]`, "NUL"},
		{`"\ud800"`, "lone UTF-16 surrogate"},
		{`"\udc00"`, "lone UTF-16 surrogate"},
		{`"\ud800x"`, "lone UTF-16 surrogate"},
		{`"\ud800\u0041"`, "lone UTF-16 surrogate"},
		{`{"k":"\ud800"}`, "lone UTF-16 surrogate"},
		{"\"caf\xe9\"", "not valid UTF-8"},
		{`{"a":1,"a":2}`, `key "a" appears more than once`},
		{`{"x":{"b":1,"c":2,"b":3}}`, `key "b" appears more than once`},
		{`[{"a":1},{"a":2,"a":2}]`, `key "a" appears more than once`},
		{`1e400000`, "out of range"},
		{`{"n":-1e400000}`, "out of range"},
		{`1e131072`, "out of range"},
		{`0.1e131073`, "out of range"},
		{`1e-16384`, "out of range"},
		{`0e-20000`, "out of range"},
		{`1.0e-16383`, "out of range"},
		{`1e99999999999`, "out of range"},
		{`1` + strings.Repeat("0", 131072), "out of range"},
	} {
		_, err := Canonical([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "payload") {
			t.Errorf("Canonical(%.40q) = %v, want an error about the payload containing %q", tc.in, err, tc.want)
		}
	}
	// The edges PostgreSQL still stores, and what only looks alike.
	for _, in := range []string{
		`1e131071`, `9.9e131071`, `0.1e131072`, `1e-16383`, `0e200000`, `-0.5e-16382`,
		`1` + strings.Repeat("0", 131071), `"\ud83d\ude00"`, `"\\u0000"`, `"\\ud800"`, `{"a":{"a":1},"b":{"a":2}}`,
	} {
		if _, err := Canonical([]byte(in)); err != nil {
			t.Errorf("Canonical(%.40q): %v", in, err)
		}
	}
}

func TestCheckNamesTheDocument(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":1,"a":2}`: `result: key "a" appears more than once in an object`,
		`"\ud800"`:      `result contains a lone UTF-16 surrogate \ud800: pair it or remove it`,
		`"\u0000"`:      `result contains the NUL character`,
		`{"a":`:         `result is not valid JSON`,
		"\"\xff\"":      `result is not valid UTF-8`,
	} {
		err := Check("result", []byte(doc))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want %q", doc, err, want)
		}
	}
	if err := Check("result", []byte(`{"a":["\ud83d\ude00",1e5]}`)); err != nil {
		t.Errorf("a good document: %v", err)
	}
}

func TestDepthAndBadEscape(t *testing.T) {
	for doc, want := range map[string]int{`1`: 0, `[]`: 1, `{"[[":[{}]}`: 3, `"\"[["`: 0, `[[],[[]]]`: 3} {
		if got := Depth([]byte(doc)); got != want {
			t.Errorf("Depth(%s) = %d, want %d", doc, got, want)
		}
	}
	for tok, want := range map[string]int{`"a\ud800"`: 0xd800, `"\udc01x"`: 0xdc01, `"\u0000"`: 0, `"\ud83d\ude00"`: -1, `"\\ud800"`: -1, `"x"`: -1} {
		r, found := BadEscape([]byte(tok))
		if !found {
			r = -1
		}
		if r != want {
			t.Errorf("BadEscape(%s) = %#x, want %#x", tok, r, want)
		}
	}
}
