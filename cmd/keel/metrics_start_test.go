package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/keelq/keel/internal/testdb"
)

// readmeMetric is one row of the metrics guide's table of metrics.
type readmeMetric struct {
	name, kind string
	labels     []string
}

// readmeMetrics reads the table of metrics in the "Metrics" section of
// docs/observability.md.
func readmeMetrics(t *testing.T) []readmeMetric {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(keel_[a-z_]+)` \\| (counter|gauge|histogram) \\|([a-z_, ]*)\\|")
	var out []readmeMetric
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Metrics"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `keel_") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("docs/observability.md: a metrics row this test cannot read: %s", line)
		}
		var labels []string
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		out = append(out, readmeMetric{name: m[1], kind: m[2], labels: labels})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("docs/observability.md lists %d metrics; the table was not found", len(out))
	}
	return out
}

// scrape is one /metrics answer: each family's type, and its series as
// "name{labels}" → value text.
type scrape struct {
	types  map[string]string
	series map[string][]scraped
}

type scraped struct {
	labels map[string]string
	value  string
}

var (
	typeLine   = regexp.MustCompile(`^# TYPE (\S+) (\S+)$`)
	seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func parseScrape(t *testing.T, body string) scrape {
	t.Helper()
	s := scrape{types: map[string]string{}, series: map[string][]scraped{}}
	for line := range strings.SplitSeq(body, "\n") {
		if m := typeLine.FindStringSubmatch(line); m != nil {
			s.types[m[1]] = m[2]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := seriesLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("a /metrics line this test cannot read: %q", line)
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		s.series[m[1]] = append(s.series[m[1]], scraped{labels: labels, value: m[3]})
	}
	return s
}

// TestServeMetricsFromTheStart: a fresh keel serve, before any task ran,
// exports every metric family the metrics guide lists, of the type it says, and
// each family labelled by queue or type has a series at 0 for the
// configured queue and type, so that a Prometheus rule on increase()
// sees the first event. On SQLite, PostgreSQL and MariaDB.
func TestServeMetricsFromTheStart(t *testing.T) {
	t.Parallel()
	testdb.Require(t, testdb.Redis) // keel_redis_gate_total is there with a gate
	bin := buildKeel(t)
	want := readmeMetrics(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the target was called before any task was enqueued: %s", r.URL)
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
[[tokens]]
token = %q
role = "read"
[redis]
url = "redis://%s/0"
prefix = "keeltest:metrics:%s:"
[queues.mail]
workers = 2
[types.email]
url = %q
queue = "mail"
[types.report]
queue = "reports"
[[schedules]]
name = "nightly"
spec = "0 3 * * *"
type = "email"
`, metricsReadToken, testdb.RedisAddr(), t.Name(), target.URL)), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, bin, nil, append(args, "--listen", "127.0.0.1:0", "--config", cfg)...)
			code, body := get(t, s.addr+"/metrics", metricsReadToken)
			if code != http.StatusOK {
				t.Fatalf("GET /metrics: %d %s", code, body)
			}
			got := parseScrape(t, body)
			for _, m := range want {
				kind, ok := got.types[m.name]
				if !ok {
					t.Errorf("%s (docs/observability.md) is not in /metrics before any task ran", m.name)
					continue
				}
				if kind != m.kind {
					t.Errorf("%s is a %s in /metrics, a %s in docs/observability.md", m.name, kind, m.kind)
				}
				// The series of the configured queue and type, at 0.
				need := map[string]string{}
				for _, l := range m.labels {
					switch l {
					case "queue":
						need[l] = "mail"
					case "type":
						need[l] = "email"
						if strings.HasPrefix(m.name, "keel_internal_") {
							need[l] = "keel.notify.log" // keel's own: its log notifier's deliveries
						}
					case "schedule":
						need[l] = "nightly"
					}
				}
				if len(need) == 0 {
					continue
				}
				name := m.name
				if m.kind == "histogram" {
					name += "_count"
				}
				found := false
				for _, sr := range got.series[name] {
					match := true
					for k, v := range need {
						match = match && sr.labels[k] == v
					}
					if match {
						found = true
						if sr.value != "0" {
							t.Errorf("%s%v is %s before any task ran, want 0", name, sr.labels, sr.value)
						}
					}
				}
				if !found {
					t.Errorf("%s has no series for %v before any task ran", name, need)
				}
			}
			// The enqueue-only type, on its own queue, is counted from the
			// start too.
			for _, w := range []string{
				`keel_tasks_enqueued_total{queue="reports",type="report"} 0`,
				`keel_tasks{queue="reports",state="ready"} 0`,
				`keel_attempts_total{outcome="lease_expired",queue="mail",type="email"} 0`,
				`keel_tasks_finished_total{queue="mail",state="dead",type="email"} 0`,
			} {
				if !strings.Contains(body, w) {
					t.Errorf("/metrics lacks %s", w)
				}
			}
			if t.Failed() {
				t.Logf("/metrics:\n%s", body)
			}
		})
	}
}
