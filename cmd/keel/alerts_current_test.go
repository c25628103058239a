package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/keelq/keel/internal/testdb"
	"github.com/keelq/keel/server"
)

// TestServeAlertShowsFiredAndCurrent: 4 dead letters fire dead_per_hour
// for type mail; 6 more die while it fires; after the next evaluation
// GET /v1/alerts and keel alerts show the 4 it fired with and the 10 of
// now. On SQLite, PostgreSQL and MariaDB.
func TestServeAlertShowsFiredAndCurrent(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "mail provider down", http.StatusInternalServerError)
	}))
	defer target.Close()
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var args []string
			switch db {
			case "sqlite":
				args = []string{"--db", filepath.Join(dir, "keel.db")}
			case "postgres":
				testdb.Require(t, testdb.Postgres)
				args = []string{"--dsn", testPostgresDSN(), "--schema", testSchema(t)}
			case "mysql":
				_, dsn := testdb.MySQLDatabase(t, "keel_cmd")
				args = []string{"--dsn", testdb.MySQLURL(t, dsn)}
			}
			cfg := filepath.Join(dir, "keel.toml")
			if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[engine]
poll_interval = "50ms"
[alerts]
dead_per_hour = 3
node_lost = false
interval = "200ms"
[types.mail]
url = %q
max_attempts = 1
`, target.URL)), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, bin, nil, append(args, "--listen", "127.0.0.1:0", "--config", cfg)...)
			enqueue := func(n int) {
				for i := range n {
					s.cli(t, bin, "enqueue", "mail", fmt.Sprintf(`{"n":%d}`, i))
				}
			}
			// The API's answer, read with plain HTTP.
			mail := func() *server.AlertRecord {
				code, body := get(t, s.addr+"/v1/alerts?state=firing&subject=type:mail", "")
				if code != http.StatusOK {
					t.Fatalf("GET /v1/alerts: %d %s", code, body)
				}
				var l server.AlertList
				if err := json.Unmarshal([]byte(body), &l); err != nil {
					t.Fatal(err)
				}
				if len(l.Alerts) != 1 {
					return nil
				}
				return &l.Alerts[0]
			}
			enqueue(4)
			waitUntil(t, 30*time.Second, "the alert of type mail", func() bool { return mail() != nil })
			a := mail()
			if a.Values["dead"] != float64(4) || a.CurrentValues["dead"] != float64(4) || a.CurrentMessage != a.Message ||
				!a.CurrentAt.Equal(a.FiredAt) {
				t.Fatalf("just fired: %+v", a)
			}
			enqueue(6)
			waitUntil(t, 30*time.Second, "the alert's current numbers at 10", func() bool {
				a := mail()
				return a != nil && a.CurrentValues["dead"] == float64(10)
			})
			a = mail()
			if a.Values["dead"] != float64(4) || a.State != "firing" || !a.CurrentAt.After(a.FiredAt) {
				t.Errorf("GET /v1/alerts: %+v", a)
			}
			wantFired := regexp.MustCompile(`^4 tasks of type mail were dead-lettered in the last hour`)
			wantNow := regexp.MustCompile(`^10 tasks of type mail were dead-lettered in the last hour`)
			if !wantFired.MatchString(a.Message) || !wantNow.MatchString(a.CurrentMessage) {
				t.Errorf("GET /v1/alerts: message %q, current %q", a.Message, a.CurrentMessage)
			}
			// The CLI: its JSON is the API's; its text shows both.
			var l server.AlertList
			if err := json.Unmarshal([]byte(s.cli(t, bin, "alerts", "--firing", "--json")), &l); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range l.Alerts {
				if r.Subject == "type:mail" {
					found = true
					if r.Values["dead"] != float64(4) || r.CurrentValues["dead"] != float64(10) {
						t.Errorf("keel alerts --json: %+v", r)
					}
				}
			}
			if !found {
				t.Errorf("keel alerts --json lacks the alert of type mail: %+v", l)
			}
			out := s.cli(t, bin, "alerts", "--firing")
			for _, re := range []string{
				`(?m)^#\d+ dead_per_hour type:mail: FIRING since .*\n  at firing: 4 tasks of type mail were dead-lettered in the last hour`,
				`(?m)^  now \([^)]+\): 10 tasks of type mail were dead-lettered in the last hour`,
			} {
				if !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("keel alerts --firing does not match %s:\n%s", re, out)
				}
			}
		})
	}
}
