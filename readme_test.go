package keel_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeQuickStartCompiles copies the Go block of README.md's
// "Quick start" into a module of its own that uses this checkout, then
// builds and vets it, so the first program a new user copies keeps
// compiling.
func TestReadmeQuickStartCompiles(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := quickStart(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	checkout, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module quickstart\n\ngo 1.26\n\nrequire github.com/keelq/keel v0.0.0\n\n" +
		"replace github.com/keelq/keel => " + checkout + "\n"
	for name, body := range map[string]string{"main.go": src, "go.mod": goMod, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod lets go add keel's own requirements to the temporary go.mod,
	// from the module cache this checkout's build already filled.
	for _, args := range [][]string{{"build", "-mod=mod", "-o", os.DevNull, "."}, {"vet", "-mod=mod", "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s on the README's quick start: %v\n%s\n--- the program:\n%s", args[0], err, out, src)
		}
	}
}

// quickStart returns the first ```go block of the "## Quick start"
// section.
func quickStart(readme string) (string, error) {
	_, section, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		return "", errors.New("README.md has no \"## Quick start\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, rest, ok := strings.Cut(section, "```go\n")
	if !ok {
		return "", errors.New("the quick start has no ```go block")
	}
	src, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		return "", errors.New("the quick start's ```go block is not closed")
	}
	return src + "\n", nil
}
