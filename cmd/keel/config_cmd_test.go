package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/keelq/keel/cmd/keel/internal/config"
)

// clearKeelEnv unsets every KEEL_* variable for the test.
func clearKeelEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "KEEL_") {
			t.Setenv(k, "")
		}
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keel.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigCheck(t *testing.T) {
	clearKeelEnv(t)
	path := writeConfig(t, `
[[tokens]]
token = "file-token-0123456789"
role = "admin"
[engine]
max_attempts = 3
[types.email]
url = "http://127.0.0.1:9/send"
headers = { Authorization = "Bearer hunter2" }
`)
	t.Setenv("KEEL_ENGINE_TIMEOUT", "2m")
	t.Setenv("KEEL_TOKEN", "env-token-0123456789")
	out, _, err := keelCmd(t, "", "config", "check", "--config", path, "--listen", "127.0.0.1:9999", "--set", "engine.claim_batch=10")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^file: ` + regexp.QuoteMeta(path) + `$`,
		`(?m)^KEY\s+VALUE\s+SOURCE\s+NOTE$`,
		`(?m)^listen\s+127\.0\.0\.1:9999\s+flag\s*$`,
		`(?m)^engine\.claim_batch\s+10\s+flag\s*$`,
		`(?m)^engine\.timeout\s+2m\s+env\s*$`,
		`(?m)^engine\.max_attempts\s+3\s+file\s*$`,
		`(?m)^engine\.lease_ttl\s+30s\s+default\s*$`,
		`(?m)^tokens\[0\]\s+role=admin token=<redacted, 21 chars>\s+file\s*$`,
		`(?m)^tokens\[1\]\s+role=admin token=<redacted, 20 chars>\s+env\s*$`,
		`(?m)^types\.email\.url\s+http://127\.0\.0\.1:9/send\s+file\s*$`,
		`(?m)^types\.email\.timeout\s+2m\s+default\s*$`,
		`(?m)^types\.email\.headers\.Authorization\s+<redacted>\s+file\s*$`,
		`(?m)^configuration OK$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %s", re)
		}
	}
	if strings.Contains(out, "file-token-0123456789") || strings.Contains(out, "env-token") || strings.Contains(out, "hunter2") {
		t.Errorf("a secret is shown:\n%s", out)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}

	out, _, err = keelCmd(t, "", "config", "check", "--config", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	v := decode[struct {
		File     string
		Values   []config.Value
		Warnings []string
	}](t, out)
	if v.File != path || len(v.Values) < 40 || v.Warnings == nil {
		t.Fatalf("--json: %+v", v)
	}
	for _, val := range v.Values {
		if val.Key == "engine.timeout" && (val.Value != "2m" || val.Source != config.SourceEnv || val.Env != "KEEL_ENGINE_TIMEOUT") {
			t.Fatalf("--json engine.timeout: %+v", val)
		}
	}
}

func TestConfigCheckErrors(t *testing.T) {
	clearKeelEnv(t)
	cases := []struct {
		file string
		env  map[string]string
		args []string
		want []string
	}{
		{file: "[engine]\ntimout = \"1s\"\nmax_attempts = 0", want: []string{"unknown key engine.timout"}},
		{file: "[engine]\nmax_attempts = 0\n[log]\nlevel = \"loud\"", want: []string{"configuration:\n  ", "engine.max_attempts: must be in 1..1000, got 0", "\n  log.level"}},
		{file: "[types.email]\nurl = \"http://h/\"\nheaders = { Idempotency-Key = \"x\" }", want: []string{`types.email: httptarget: Headers: "Idempotency-Key" is set by keel`}},
		{file: "", env: map[string]string{"KEEL_HTTP_READ_TIMEOUT": "forever"}, want: []string{`KEEL_HTTP_READ_TIMEOUT: invalid duration "forever"`}},
		{file: "", args: []string{"--set", "engine.timeout"}, want: []string{"want key=value"}},
		{file: "", args: []string{"--listen", "0.0.0.0:7400"}, want: []string{`listen (from a flag): "0.0.0.0:7400" is not a loopback address and no tokens are configured`}},
	}
	for _, tc := range cases {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		_, _, err := keelCmd(t, "", append([]string{"config", "check", "--config", writeConfig(t, tc.file)}, tc.args...)...)
		for k := range tc.env {
			t.Setenv(k, "")
		}
		if err == nil {
			t.Errorf("%q accepted", tc.file)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q\ndoes not contain %q", err, w)
			}
		}
	}
	if _, _, err := keelCmd(t, "", "config", "check", "--config", filepath.Join(t.TempDir(), "none.toml")); err == nil || !strings.Contains(err.Error(), "none.toml") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestServeRefusesPublicWithoutTokens(t *testing.T) {
	clearKeelEnv(t)
	db := filepath.Join(t.TempDir(), "keel.db")
	_, _, err := keelCmd(t, "", "serve", "--config", writeConfig(t, ""), "--db", db, "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "is not a loopback address and no tokens are configured") {
		t.Fatalf("serve on 0.0.0.0 without tokens: %v", err)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("the refused serve created the database: %v", err)
	}
}

func TestConfigExample(t *testing.T) {
	clearKeelEnv(t)
	out, _, err := keelCmd(t, "", "config", "example")
	if err != nil || out != config.Example {
		t.Fatalf("config example: %v", err)
	}
	if _, _, err := keelCmd(t, "", "config", "check", "--config", writeConfig(t, out)); err != nil {
		t.Fatalf("the example does not check: %v", err)
	}
}
