package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
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

// walkCases are valid JSON objects for the member walk: escaped keys,
// strings holding brackets, commas and quotes, nesting, white space
// everywhere, numbers and literals at the end of an object.
var walkCases = []string{
	`{}`, ` { } `, `{"a":1}`, "{ \"a\" :\t1 ,\n\"b\" : [ 1 , 2 ] }", `{"a\"b":"c}d","e\\":"\\"}`,
	`{"\u00e9t\u00e9":true,"x":false,"y":null}`, `{"a":{"b":{"c":[{},[],"]"]}},"d":-1.5e+3}`,
	`{"s":"{[,:]}","n":0,"z":[[[]]]}`, `{"":""}`, `{"a":[1,"2",{"3":4}],"b":"\/"}`,
}

// decoderMembers is the member walk done by encoding/json: the keys and
// raw values of the object raw.
func decoderMembers(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, tok.(string), string(val))
	}
	return out, nil
}

func walkedMembers(t *testing.T, raw []byte) []string {
	var out []string
	if err := eachMember(raw, "", func(k string, v json.RawMessage) error {
		out = append(out, k, string(v))
		return nil
	}); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return out
}

// TestEachMemberMatchesDecoder: the byte walk finds the keys and raw
// values encoding/json finds, on every valid object.
func TestEachMemberMatchesDecoder(t *testing.T) {
	t.Parallel()
	for _, c := range walkCases {
		raw := bytes.Trim([]byte(c), jsonSpace)
		want, err := decoderMembers(raw)
		if err != nil {
			t.Fatalf("%q: %v", c, err)
		}
		if got := walkedMembers(t, raw); !slices.Equal(got, want) {
			t.Errorf("%q: walked %q, decoder %q", c, got, want)
		}
	}
}

// FuzzEachMember: on any body scanBody accepts, the walk and
// encoding/json agree.
func FuzzEachMember(f *testing.F) {
	for _, c := range append(walkCases, scanCases...) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !utf8.ValidString(body) || scanBody([]byte(body)) != nil {
			return
		}
		raw := bytes.Trim([]byte(body), jsonSpace)
		want, err := decoderMembers(raw)
		if err != nil {
			t.Fatalf("%q: decoder: %v", body, err)
		}
		if got := walkedMembers(t, raw); !slices.Equal(got, want) {
			t.Errorf("%q: walked %q, decoder %q", body, got, want)
		}
	})
}
