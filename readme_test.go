package keel_test

import (
	"errors"
	"fmt"
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
	// The module is set up as the quick start says: its go mod init and go
	// mod edit lines, run as written but with this checkout for ../keel.
	setup, err := quickStartSetup(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range setup {
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "=../keel", "="+checkout)
		}
		cmd := exec.Command(goBin, args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s, as the quick start says: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// In place of go mod tidy, which would ask the checksum database: keel's
	// own go.sum.
	for name, body := range map[string]string{"main.go": src, "go.sum": string(sum)} {
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

// quickStartSetup returns the go mod init and go mod edit commands of the
// quick start's first ```sh block, each split into words.
func quickStartSetup(readme string) ([][]string, error) {
	_, section, _ := strings.Cut(readme, "\n## Quick start\n")
	section, _, _ = strings.Cut(section, "\n## ")
	_, rest, ok := strings.Cut(section, "```sh\n")
	if !ok {
		return nil, errors.New("the quick start has no ```sh block saying how to set up a module")
	}
	block, _, _ := strings.Cut(rest, "\n```")
	var cmds [][]string
	for line := range strings.Lines(block) {
		line, _, _ = strings.Cut(line, "#")
		for part := range strings.SplitSeq(line, "&&") {
			if f := strings.Fields(part); len(f) > 2 && f[0] == "go" && f[1] == "mod" && (f[2] == "init" || f[2] == "edit") {
				cmds = append(cmds, f)
			}
		}
	}
	if len(cmds) != 2 || cmds[0][2] != "init" || cmds[1][2] != "edit" {
		return nil, fmt.Errorf("the quick start's ```sh block should run go mod init, then go mod edit with a replace line; found %q", cmds)
	}
	return cmds, nil
}
