package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/server"
)

// TestWorkflowCmd: keel workflow create reads a workflow from a file or
// standard input, show follows it to succeeded with each task's needs,
// list prints a table; a cycle is refused; keel enqueue --depends-on
// holds a task until its dependency succeeded.
func TestWorkflowCmd(t *testing.T) {
	h := keel.NewHandlers()
	for _, typ := range []string{"report", "email"} {
		keel.Handle(h, typ, func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
	}
	s := newAPI(t, serverOpts{handlers: h})
	file := filepath.Join(t.TempDir(), "weekly.json")
	doc := `{"name":"weekly","tasks":[{"name":"mail","type":"email","needs":["sales","stock"]},` +
		`{"name":"sales","type":"report","payload":{"r":"sales"}},{"name":"stock","type":"report","payload":{"r":"stock"}}]}`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := s.keel(t, "workflow", "create", file)
	m := regexp.MustCompile(`^workflow (\d+) created: 3 tasks\n`).FindStringSubmatch(out)
	if m == nil || !regexp.MustCompile(`(?m)^mail\s+\d+\s+email\s+\S+\s+sales, stock$`).MatchString(out) {
		t.Fatalf("keel workflow create:\n%s", out)
	}
	waitUntil(t, 30*time.Second, "workflow succeeded", func() bool {
		return decode[server.WorkflowRecord](t, s.keel(t, "workflow", "show", m[1], "--json")).State == "succeeded"
	})
	out = s.keel(t, "workflow", "show", m[1])
	for _, re := range []string{`(?m)^state:\s+succeeded$`, `(?m)^mail\s+\d+\s+email\s+succeeded\s+sales, stock$`,
		`(?m)^sales\s+\d+\s+report\s+succeeded\s+-$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("keel workflow show lacks %s:\n%s", re, out)
		}
	}
	if out = s.keel(t, "workflow", "list"); !regexp.MustCompile(`(?m)^` + m[1] + `\s+weekly\s+cancel\s`).MatchString(out) {
		t.Fatalf("keel workflow list:\n%s", out)
	}
	_, _, err := keelCmd(t, `{"name":"w","tasks":[{"name":"a","type":"email","needs":["b"]},{"name":"b","type":"email","needs":["a"]}]}`,
		"workflow", "create", "-", "--server", s.url)
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a cycle: %v", err)
	}

	out = s.keel(t, "enqueue", "report", "{}")
	dep := regexp.MustCompile(`^enqueued task (\d+)`).FindStringSubmatch(out)
	if dep == nil {
		t.Fatalf("keel enqueue:\n%s", out)
	}
	out = s.keel(t, "enqueue", "email", "{}", "--depends-on", dep[1], "--json")
	held := decode[server.Task](t, out)
	waitUntil(t, 30*time.Second, "the dependent succeeded", func() bool {
		return decode[server.Task](t, s.keel(t, "inspect", strconv.FormatInt(held.ID, 10), "--json")).State == "succeeded"
	})
}
