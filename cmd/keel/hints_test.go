package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAlertHintsNameRealCommands reads the "next:" hints the alert rules
// and the brake give (the hint fields of the sources of the root package
// and of internal/alerts, which evaluates the rules) and
// checks that every keel command they name exists, with the flags they
// pass: an operator paged at night runs them as written.
func TestAlertHintsNameRealCommands(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../../*.go", "../../internal/alerts/*.go"} {
		matched, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matched...)
	}
	hintLine := regexp.MustCompile(`hint:\s*(?:fmt\.Sprintf\()?"([^"]*)"`)
	command := regexp.MustCompile(`keel ((?:[a-z][a-z-]*|--[a-z-]+|%[sdq]|<id>|\d+[hm]?)(?: (?:[a-z][a-z-]*|--[a-z-]+|%[sdq]|<id>|\d+[hm]?))*)`)
	root := newRootCmd()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range hintLine.FindAllStringSubmatch(string(src), -1) {
			for _, c := range command.FindAllStringSubmatch(m[1], -1) {
				words := strings.Fields(c[1])
				cmd, rest, err := root.Find(words)
				if err != nil || cmd == root {
					t.Errorf("%s: hint %q names %q, which is not a keel command", filepath.Base(f), m[1], "keel "+c[1])
					continue
				}
				for _, w := range rest {
					if name, ok := strings.CutPrefix(w, "--"); ok && cmd.Flags().Lookup(name) == nil {
						t.Errorf("%s: hint %q passes --%s, which keel %s does not take", filepath.Base(f), m[1], name, cmd.Name())
					}
				}
				checked++
			}
		}
	}
	if checked < 8 {
		t.Fatalf("checked only %d commands in hints: the pattern no longer finds them", checked)
	}
}
