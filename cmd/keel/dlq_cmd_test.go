package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/server"
)

// failing handles "email" by failing for good, to make dead letters.
func failing() *keel.Handlers {
	h := keel.NewHandlers()
	keel.Handle(h, "email", func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
		return keel.Permanent(errors.New("mailbox unavailable\nsecond line"))
	})
	return h
}

func waitState(t *testing.T, c *keel.Client, state keel.State, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		counts, err := c.Counts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, byState := range counts {
			got += byState[state]
		}
		if got >= int64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks %s after 20s, want %d: %v", got, state, n, counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDLQ does not run in parallel: testPurgeConfirmation sets the
// package's clock (now), which the other tests read.
func TestDLQ(t *testing.T) {
	s := newAPI(t, serverOpts{handlers: failing()})
	for i := range 3 {
		s.keel(t, "enqueue", "email", fmt.Sprintf(`{"i":%d}`, i))
	}
	waitState(t, s.client, keel.StateDead, 3)

	out := s.keel(t, "dlq", "list")
	if strings.Count(out, "\n") != 4 || !strings.Contains(out, "permanent: mailbox unavailable second line") {
		t.Fatalf("dlq list:\n%s", out)
	}
	if out := s.keel(t, "dlq", "list", "--before", "1h"); out != "no dead tasks\n" {
		t.Fatalf("dlq list --before 1h: %q", out)
	}
	if l := decode[server.TaskList](t, s.keel(t, "dlq", "list", "--after", "1h", "--json")); len(l.Tasks) != 3 {
		t.Fatalf("dlq list --after 1h: %d", len(l.Tasks))
	}
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if l := decode[server.TaskList](t, s.keel(t, "dlq", "list", "--after", "1h", "--before", soon, "--json")); len(l.Tasks) != 3 {
		t.Fatalf("dlq list --after 1h --before %s: %d", soon, len(l.Tasks))
	}
	if out := s.keel(t, "dlq", "list", "--after", soon); out != "no dead tasks\n" {
		t.Fatalf("dlq list --after %s: %q", soon, out)
	}
	if err := s.keelErr(t, "dlq", "list", "--after", "1h", "--before", "2h"); !strings.Contains(err.Error(), "--after") {
		t.Fatalf("dlq list with after later than before: %v", err)
	}
	id := strconv.FormatInt(decode[server.TaskList](t, s.keel(t, "dlq", "list", "--json")).Tasks[0].ID, 10)
	in := s.keel(t, "inspect", id)
	for _, want := range []string{"state     dead", "arrived", "attempt 1 on ", ": failed permanently after", "mailbox unavailable", "second line", "dead-lettered: requeue with keel retry " + id} {
		if !strings.Contains(in, want) {
			t.Errorf("inspect of a dead task lacks %q:\n%s", want, in)
		}
	}

	testPurgeConfirmation(t, s)
	if err := s.keelErr(t, "dlq", "requeue", "--after", "1h", "--before", "2h"); !strings.Contains(err.Error(), "--after") {
		t.Fatalf("after later than before: %v", err)
	}
	if out := s.keel(t, "dlq", "requeue", "--queue", "other"); out != "requeued 0 dead tasks\n" {
		t.Fatalf("requeue of another queue: %q", out)
	}
	// --id takes exactly the given dead letters.
	dead := decode[server.TaskList](t, s.keel(t, "dlq", "list", "--json")).Tasks
	one := strconv.FormatInt(dead[0].ID, 10)
	if out := s.keel(t, "dlq", "requeue", "--id", one+",999999"); out != "requeued 1 dead tasks\n" {
		t.Fatalf("requeue --id: %q", out)
	}
	if err := s.keelErr(t, "dlq", "requeue", "--id", "0"); !strings.Contains(err.Error(), "task ids are positive") {
		t.Fatalf("requeue --id 0: %v", err)
	}
	if out := s.keel(t, "dlq", "purge", "--force", "--id", one); !strings.Contains(out, "purge would delete those of the 1 given tasks that are dead for good") {
		t.Fatalf("purge --id without --yes: %q", out)
	}
	waitState(t, s.client, keel.StateDead, 3)
	if out := s.keel(t, "dlq", "requeue", "--type", "email"); out != "requeued 3 dead tasks\n" {
		t.Fatalf("requeue: %q", out)
	}
	// They fail again and are dead again. Dead letters are kept a week:
	// without --force purge takes none of them, and says why.
	waitState(t, s.client, keel.StateDead, 3)
	out, errOut, err := keelCmd(t, "", "dlq", "purge", "--yes", "--server", s.url)
	if err != nil || out != "purged 0 dead tasks\n" || !strings.Contains(errOut, "keeping dead letters younger than 7 days") {
		t.Fatalf("purge without --force: %q %q %v", out, errOut, err)
	}
	if err := s.keelErr(t, "dlq", "purge", "--yes", "--after", "1h"); !strings.Contains(err.Error(), "younger than 7 days: nothing to purge without --force") {
		t.Fatalf("purge --after 1h without --force: %v", err)
	}
	waitState(t, s.client, keel.StateDead, 3)
	if out := s.keel(t, "dlq", "purge", "--yes", "--force", "--json"); decode[server.BulkResponse](t, out).Count != 3 {
		t.Fatalf("purge --json: %s", out)
	}
	if out := s.keel(t, "dlq", "list"); out != "no dead tasks\n" {
		t.Fatalf("dlq list after purge: %q", out)
	}
}

// testPurgeConfirmation: purge without --yes deletes nothing and says how
// many dead letters match its filter, in a sentence; s holds 3 dead tasks
// of type email on queue default.
func testPurgeConfirmation(t *testing.T, s *apiSetup) {
	t.Helper()
	// A fixed clock for the command's relative times; TestDLQ does not run
	// in parallel.
	at := time.Now().Truncate(time.Second)
	now = func() time.Time { return at }
	defer func() { now = time.Now }()
	soon := at.Add(time.Hour)
	for _, c := range []struct {
		args []string
		want string // the error, or with a "nothing" prefix the output
	}{
		{nil, "purge would delete all 3 dead tasks for good: run it again with --yes"},
		{[]string{"--type", "email"}, "purge would delete 3 dead tasks of type email for good: run it again with --yes"},
		{[]string{"--queue", "default"}, "purge would delete 3 dead tasks in queue default for good: run it again with --yes"},
		{[]string{"--type", "email", "--queue", "default"},
			"purge would delete 3 dead tasks of type email in queue default for good: run it again with --yes"},
		{[]string{"--type", "report"}, "nothing to purge: no dead tasks of type report\n"},
		{[]string{"--type", "email", "--queue", "other"}, "nothing to purge: no dead tasks of type email in queue other\n"},
		{[]string{"--after", "1h"}, "purge would delete 3 dead tasks dead-lettered since " + stamp(now().Add(-time.Hour)) + " (1h ago) for good: run it again with --yes"},
		{[]string{"--before", soon.Format(time.RFC3339)},
			"purge would delete 3 dead tasks dead-lettered before " + stamp(soon) + " (in 1h) for good: run it again with --yes"},
		{[]string{"--before", "1h"}, "nothing to purge: no dead tasks dead-lettered before " + stamp(now().Add(-time.Hour)) + " (1h ago)\n"},
		{[]string{"--type", "email", "--after", "1h", "--before", soon.Format(time.RFC3339)},
			"purge would delete 3 dead tasks of type email, dead-lettered between " + stamp(now().Add(-time.Hour)) + " (1h ago) and " +
				stamp(soon) + " (in 1h) for good: run it again with --yes"},
	} {
		out, _, err := keelCmd(t, "", append([]string{"dlq", "purge", "--force", "--server", s.url}, c.args...)...)
		got := out
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("dlq purge %s:\n got %q\nwant %q", strings.Join(c.args, " "), got, c.want)
		}
	}
	waitState(t, s.client, keel.StateDead, 3) // still there

}

// TestDLQListFilters: dlq list passes --after and --before to the API as
// finished_after and finished_before, asks for --limit tasks, and shows
// what the API answers without filtering it again.
func TestDLQListFilters(t *testing.T) {
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	before := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	inside, outside := after.Add(time.Hour), before.Add(time.Hour)
	var queries []url.Values
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/dead", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Query())
		json.NewEncoder(w).Encode(server.TaskList{ //nolint:errcheck
			Tasks: []server.Task{
				{ID: 2, Type: "email", Queue: "default", State: "dead", FinishedAt: &inside},
				{ID: 1, Type: "email", Queue: "default", State: "dead", FinishedAt: &outside},
			},
			NextCursor: "next",
		})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	out, _, err := keelCmd(t, "", "dlq", "list", "--server", srv.URL, "--type", "email", "--limit", "2", "--json",
		"--after", after.Format(time.RFC3339), "--before", before.Format(time.RFC3339))
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) != 1 {
		t.Fatalf("%d calls, want 1: %v", len(queries), queries)
	}
	q := queries[0]
	want := url.Values{"type": {"email"}, "limit": {"2"},
		"finished_after": {"2026-01-01T00:00:00Z"}, "finished_before": {"2026-01-02T00:00:00Z"}}
	if !reflect.DeepEqual(q, want) {
		t.Fatalf("query %v, want %v", q, want)
	}
	if l := decode[server.TaskList](t, out); len(l.Tasks) != 2 || l.Tasks[0].ID != 2 || l.Tasks[1].ID != 1 {
		t.Fatalf("listed %+v, want the API's two tasks", l.Tasks)
	}

	queries = nil
	if _, _, err := keelCmd(t, "", "dlq", "list", "--server", srv.URL); err != nil {
		t.Fatal(err)
	}
	// This fake answers two tasks a page, so the CLI pages on to 50.
	if q := queries[0]; q.Has("finished_after") || q.Has("finished_before") || q.Get("limit") != "50" {
		t.Fatalf("unfiltered list asked %v first", q)
	}
}

// TestBulkPages: requeue and purge page through the API 1000 at a time
// until a call changes nothing, never taking a task dead after the
// command started.
func TestBulkPages(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var calls []server.BulkRequest
	remaining := int64(2500)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(server.Stats{At: at, Counts: map[string]int64{"dead": remaining}}) //nolint:errcheck
	})
	mux.HandleFunc("POST /v1/dead/{action}", func(w http.ResponseWriter, r *http.Request) {
		var req server.BulkRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		calls = append(calls, req)
		n := min(remaining, int64(req.Limit))
		remaining -= n
		json.NewEncoder(w).Encode(server.BulkResponse{Count: n}) //nolint:errcheck
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	out, _, err := keelCmd(t, "", "dlq", "requeue", "--server", srv.URL, "--type", "email", "--before", "2020-01-01T00:00:00Z")
	if err != nil || out != "requeued 2500 dead tasks\n" {
		t.Fatalf("requeue: %q %v", out, err)
	}
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4 (1000, 1000, 500, 0)", len(calls))
	}
	for _, c := range calls {
		if c.Limit != 1000 || c.Type != "email" || c.FinishedBefore == nil || !c.FinishedBefore.Equal(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("call %+v", c)
		}
	}
	calls, remaining = nil, 1200
	if out, _, err := keelCmd(t, "", "dlq", "purge", "--yes", "--force", "--server", srv.URL); err != nil || out != "purged 1200 dead tasks\n" {
		t.Fatalf("purge: %q %v", out, err)
	}
	if len(calls) != 3 || !calls[0].FinishedBefore.Equal(at) {
		t.Fatalf("purge calls %+v: want 3, cut off at the server's time", calls)
	}
}

// TestPurgeConfirmationCountsPages: with a time filter purge counts the
// matching dead letters page by page, and says "more than" past
// maxConfirmCount instead of reading on.
func TestPurgeConfirmationCountsPages(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var total, listed int
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(server.Stats{At: at, Counts: map[string]int64{"dead": 99999}}) //nolint:errcheck
	})
	mux.HandleFunc("GET /v1/dead", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("type") != "email" || q.Get("finished_after") == "" || q.Get("finished_before") != "2026-01-02T03:04:05Z" {
			t.Errorf("query %v", q)
		}
		from, _ := strconv.Atoi(q.Get("cursor"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		var l server.TaskList
		for i := from; i < min(from+limit, total); i++ {
			l.Tasks = append(l.Tasks, server.Task{ID: int64(i + 1)})
		}
		listed += len(l.Tasks)
		if from+limit < total {
			l.NextCursor = strconv.Itoa(from + limit)
		}
		json.NewEncoder(w).Encode(l) //nolint:errcheck
	})
	mux.HandleFunc("POST /v1/dead/purge", func(w http.ResponseWriter, r *http.Request) {
		t.Error("purge without --yes called the purge route")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	for _, c := range []struct {
		total, listed int
		want          string
	}{
		{2500, 2500, "purge would delete 2500 dead tasks of type email, dead-lettered since "},
		{15000, 10000, "purge would delete more than 10000 dead tasks of type email, dead-lettered since "},
	} {
		total, listed = c.total, 0
		_, _, err := keelCmd(t, "", "dlq", "purge", "--force", "--server", srv.URL, "--type", "email", "--after", "30d")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || listed != c.listed {
			t.Errorf("%d dead: listed %d (want %d): %v", c.total, listed, c.listed, err)
		}
	}
}

// TestDLQPurgePreviewKeepsTheWeek: without --force, purge's preview counts
// exactly what purge --yes deletes, dead letters older than 7 days (it
// once counted every dead letter of the type, then purged none).
func TestDLQPurgePreviewKeepsTheWeek(t *testing.T) {
	t.Parallel()
	s := newAPI(t, serverOpts{handlers: failing()})
	for i := range 3 {
		s.keel(t, "enqueue", "email", fmt.Sprintf(`{"i":%d}`, i))
	}
	waitState(t, s.client, keel.StateDead, 3)

	// Without --force the preview counts what the purge deletes: only dead
	// letters older than 7 days. None are yet, although 3 are dead.
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to purge: no dead tasks older than 7 days\n"},
		{[]string{"--type", "email"}, "nothing to purge: no dead tasks of type email, older than 7 days\n"},
	} {
		out, _, err := keelCmd(t, "", append([]string{"dlq", "purge", "--server", s.url}, c.args...)...)
		if err != nil || out != c.want {
			t.Errorf("dlq purge %s without --force: %q, %v; want %q", strings.Join(c.args, " "), out, err, c.want)
		}
	}
	// One of them died 8 days ago: the preview counts exactly that one, and
	// the purge deletes exactly that one.
	sq, ok := s.drv.(interface{ DB() *sql.DB })
	if !ok {
		t.Fatalf("the test's driver %T has no DB()", s.drv)
	}
	old := decode[server.TaskList](t, s.keel(t, "dlq", "list", "--json")).Tasks[0].ID
	if _, err := sq.DB().Exec(`UPDATE keel_tasks SET finished_at = ? WHERE id = ?`, time.Now().Add(-8*24*time.Hour).UnixMicro(), old); err != nil {
		t.Fatal(err)
	}
	want := "purge would delete 1 dead task of type email, older than 7 days for good: run it again with --yes"
	if _, _, err := keelCmd(t, "", "dlq", "purge", "--type", "email", "--server", s.url); err == nil || err.Error() != want {
		t.Errorf("dlq purge --type email with one old dead letter: %v; want %q", err, want)
	}
	if out := s.keel(t, "dlq", "purge", "--type", "email", "--yes"); out != "purged 1 dead tasks\n" {
		t.Errorf("dlq purge --type email --yes: %q", out)
	}
	counts, err := s.client.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := counts["default"][keel.StateDead]; got != 2 {
		t.Errorf("%d dead tasks left after purging the old one, want 2", got)
	}
}
