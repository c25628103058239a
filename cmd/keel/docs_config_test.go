package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/keelq/keel/cmd/keel/internal/config"
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
		for _, b := range tomlBlocks(string(text)) {
			n++
			rel, _ := filepath.Rel(root, file)
			path := filepath.Join(t.TempDir(), "keel.toml")
			if err := os.WriteFile(path, []byte(b.body), 0o644); err != nil {
				t.Fatal(err)
			}
			var env []string
			for _, name := range secretEnvNames(b.body) {
				env = append(env, name+"=a-secret-of-at-least-16-characters")
			}
			if _, err := config.Load(config.Options{Path: path, Environ: env}); err != nil {
				t.Errorf("%s:%d: the ```toml block does not load: %v\n%s", rel, b.line, err, b.body)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d ```toml blocks in README.md and docs/*.md; the guides were not read", n)
	}
}

// tomlBlock is one ```toml block of a Markdown file.
type tomlBlock struct {
	line int // of the opening fence, 1-based
	body string
}

// tomlBlocks returns the blocks fenced as ```toml exactly (not, say,
// ```toml-fragment), also when the fence is indented inside a list item.
func tomlBlocks(text string) []tomlBlock {
	var out []tomlBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "```") {
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		info := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				break
			}
			l := lines[j]
			if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
				l = l[indent:]
			}
			body = append(body, l)
		}
		if info == "toml" {
			out = append(out, tomlBlock{line: i + 1, body: strings.Join(body, "\n") + "\n"})
		}
		i = j
	}
	return out
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
