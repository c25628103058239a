package mdblock

import (
	"slices"
	"testing"
)

// TestFenced: only blocks of exactly the language, indented ones unindented,
// with the line of their opening fence.
func TestFenced(t *testing.T) {
	text := "# Guide\n\n```toml\na = 1\n```\n\n```toml-fragment\nb = 2\n```\n\n- item\n\n  ```toml\n  c = 3\n    d = 4\n  ```\n\n```go\npackage main\n```\n"
	got := Fenced(text, "toml")
	want := []Block{{Line: 3, Body: "a = 1\n"}, {Line: 13, Body: "c = 3\n  d = 4\n"}}
	if !slices.Equal(got, want) {
		t.Fatalf("toml blocks %+v, want %+v", got, want)
	}
	if got := Fenced(text, "go"); len(got) != 1 || got[0].Body != "package main\n" {
		t.Fatalf("go blocks %+v", got)
	}
	if got := Fenced(text, "sh"); got != nil {
		t.Fatalf("sh blocks %+v, want none", got)
	}
}
