package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/internal/mdblock"
)

// TestDocsConfigBlocksLoad loads every ```toml block of README.md and
// docs/*.md through keel serve's configuration loader, as keel config
// check does, so a keel.toml a reader copies from the guides is one keel
// serve accepts. The environment variables a block names in token_env and
// headers_env are set; nothing else is.
func TestDocsConfigBlocksLoad(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	n := 0
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range mdblock.Fenced(string(text), "toml") {
			n++
			rel, _ := filepath.Rel(root, file)
			path := filepath.Join(t.TempDir(), "keel.toml")
			if err := os.WriteFile(path, []byte(b.Body), 0o644); err != nil {
				t.Fatal(err)
			}
			var env []string
			for _, name := range secretEnvNames(b.Body) {
				env = append(env, name+"=a-secret-of-at-least-16-characters")
			}
			if _, err := config.Load(config.Options{Path: path, Environ: env}); err != nil {
				t.Errorf("%s:%d: the ```toml block does not load: %v\n%s", rel, b.Line, err, b.Body)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d ```toml blocks in README.md and docs/*.md; the guides were not read", n)
	}
}

var (
	tokenEnv   = regexp.MustCompile(`(?m)^\s*token_env\s*=\s*"([^"]+)"`)
	headersEnv = regexp.MustCompile(`(?m)^\s*headers_env\s*=\s*\{([^}]*)\}`)
	quoted     = regexp.MustCompile(`=\s*"([^"]+)"`)
)

// secretEnvNames returns the environment variables a configuration names
// for its secrets: token_env, and the values of headers_env tables.
func secretEnvNames(body string) []string {
	var names []string
	for _, m := range tokenEnv.FindAllStringSubmatch(body, -1) {
		names = append(names, m[1])
	}
	for _, m := range headersEnv.FindAllStringSubmatch(body, -1) {
		for _, q := range quoted.FindAllStringSubmatch(m[1], -1) {
			names = append(names, q[1])
		}
	}
	return names
}
