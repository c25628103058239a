package keel_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelq/keel/internal/mdblock"
)

// TestDocsProgramsCompile builds every Go program of the guides: each
// ```go block of docs/*.md that is a whole program (package main) goes
// into a directory of its own in one temporary module that uses this
// checkout, and one go build and one go vet check them all, so the
// programs a reader copies keep compiling.
func TestDocsProgramsCompile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds programs with the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	guides, err := filepath.Glob(filepath.Join("docs", "*.md"))
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
	files := map[string]string{"go.sum": string(sum)}
	where := map[string]string{} // program directory → guide and line, for messages
	for _, guide := range guides {
		text, err := os.ReadFile(guide)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range mdblock.Fenced(string(text), "go") {
			if !strings.Contains("\n"+b.Body, "\npackage main\n") {
				continue // a fragment, shown inside a program the reader has
			}
			name := fmt.Sprintf("prog%02d", len(where)+1)
			files[filepath.Join(name, "main.go")] = b.Body
			where[name] = fmt.Sprintf("%s:%d", guide, b.Line)
		}
	}
	if len(where) == 0 {
		t.Fatal("no ```go block with package main in docs/*.md; the guides' programs were not found")
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s on the guides' programs: %v\n%s\n--- the programs:\n%s", strings.Join(args, " "), err, out, programList(where))
		}
	}
	run("mod", "init", "docsprograms")
	run("mod", "edit", "-require=github.com/keelq/keel@v0.0.0", "-replace=github.com/keelq/keel="+checkout)
	// -mod=mod lets go add keel's own requirements to the temporary go.mod,
	// from the module cache this checkout's build already filled.
	run("build", "-mod=mod", "-o", os.DevNull, "./...")
	run("vet", "-mod=mod", "./...")
	t.Logf("built and vetted %d programs:\n%s", len(where), programList(where))
}

// programList names each program's directory and where its block is.
func programList(where map[string]string) string {
	var b strings.Builder
	for i := 1; i <= len(where); i++ {
		name := fmt.Sprintf("prog%02d", i)
		fmt.Fprintf(&b, "%s: %s\n", name, where[name])
	}
	return b.String()
}
