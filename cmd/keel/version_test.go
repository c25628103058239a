package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFromBuildInfo(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build information", nil, "(devel)"},
		{"go install @version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"a checkout, pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201044500-724abdd1f2c3+dirty"}},
			"v0.0.0-20261201044500-724abdd1f2c3+dirty"},
		{"(devel) with a revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "724abdd1f2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7", "vcs.time", "2026-12-01T04:45:00Z", "vcs.modified", "false")},
			"(devel) 724abdd1f2c3 2026-12-01T04:45:00Z"},
		{"(devel) modified", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "724abdd1f2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7", "vcs.modified", "true")},
			"(devel) 724abdd1f2c3+modified"},
		{"(devel) without VCS", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)"},
	} {
		if got := versionFrom("", c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := versionFrom("v9.9.9", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}); got != "v9.9.9" {
		t.Errorf("-ldflags version: %q, want v9.9.9", got)
	}
}

// TestVersionOfCheckoutBuild: keel built with go build in a git checkout
// names the commit it was built from and says the tree had changes, not
// "dev". The checkout is a copy of this one in a fresh repository: Go
// stamps only a tree whose .git is a directory, not a linked worktree
// (golang/go#58218).
func TestVersionOfCheckoutBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the keel binary")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=keel test", "-c", "user.email=test@keel.invalid"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "snapshot")
	rev := git("rev-parse", "--short=12", "HEAD")
	if err := os.WriteFile(filepath.Join(dir, "uncommitted.txt"), []byte("a change\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "keel")
	// -trimpath, as buildKeel builds: the packages compile to the same
	// objects in this copy as in the checkout, so the build cache serves
	// them and only the link (which stamps the commit) runs again.
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-o", bin, "./cmd/keel")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if v := string(out); !strings.HasPrefix(v, "keel ") || !strings.Contains(v, rev) || !strings.Contains(v, "dirty") {
		t.Fatalf("keel version printed %q, want the commit %s and +dirty", v, rev)
	}
}
