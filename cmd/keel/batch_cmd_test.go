package main

import (
	"context"
	"encoding/json"
	"fmt"
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

// TestBatchCmd: keel batch create reads a batch from standard input or a
// file, show follows it to finished with its callbacks, list and members
// print tables or JSON; an open batch takes add --seal; a sealed one
// refuses add.
func TestBatchCmd(t *testing.T) {
	h := keel.NewHandlers()
	for _, typ := range []string{"email", "report"} {
		keel.Handle(h, typ, func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
	}
	s := newAPI(t, serverOpts{handlers: h})

	out, _, err := keelCmd(t, `{"tasks":[{"type":"email","payload":{"n":1}},{"type":"email","payload":{"n":2}}],`+
		`"on_success":{"type":"report"},"on_finish":{"type":"report"}}`, "batch", "create", "--file", "-", "--server", s.url)
	if err != nil {
		t.Fatalf("keel batch create: %v", err)
	}
	m := regexp.MustCompile(`^batch (\d+) created: 2 tasks \(running, 2 members\)\n`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "ID") || strings.Count(out, " email ") != 2 {
		t.Fatalf("keel batch create:\n%s", out)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)

	waitUntil(t, 30*time.Second, "batch finished", func() bool {
		return decode[server.BatchRecord](t, s.keel(t, "batch", "show", m[1], "--json")).State == "finished"
	})
	out = s.keel(t, "batch", "show", m[1])
	for _, re := range []string{`(?m)^batch:\s+` + m[1] + `$`, `(?m)^state:\s+finished$`, `(?m)^progress:\s+100% \(2 of 2 finished\)$`,
		`(?m)^members:\s+pending 0  running 0  succeeded 2  dead 0  cancelled 0$`, `(?m)^on_success:\s+task \d+$`, `(?m)^on_finish:\s+task \d+$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("keel batch show lacks %s:\n%s", re, out)
		}
	}

	out = s.keel(t, "batch", "members", m[1], "--limit", "1")
	if !regexp.MustCompile(`(?m)^\d+\s+email\s+default\s+succeeded\s`).MatchString(out) || !strings.Contains(out, "--after") {
		t.Fatalf("keel batch members --limit 1:\n%s", out)
	}
	if l := decode[server.BatchMembers](t, s.keel(t, "batch", "members", m[1], "--json")); len(l.Tasks) != 2 {
		t.Fatalf("keel batch members --json: %+v", l)
	}

	// An open batch from a file, added to and sealed.
	dir := t.TempDir()
	first, more := filepath.Join(dir, "batch.json"), filepath.Join(dir, "more.json")
	if err := os.WriteFile(first, []byte(`{"tasks":[{"type":"email"}],"open":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(more, []byte(`{"tasks":[{"type":"email"},{"type":"email"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bt := decode[server.BatchTasks](t, s.keel(t, "batch", "create", "--file", first, "--json"))
	if bt.Batch.State != "open" || bt.Batch.ID <= id {
		t.Fatalf("open batch %+v", bt.Batch)
	}
	open := strconv.FormatInt(bt.Batch.ID, 10)
	if out := s.keel(t, "batch", "list", "--unfinished"); !regexp.MustCompile(`(?m)^`+open+`\s+open\s+1\s+-\s+-\s+-\s`).MatchString(out) ||
		strings.Contains(out, "\n"+m[1]+" ") {
		t.Fatalf("keel batch list --unfinished:\n%s", out)
	}
	if out := s.keel(t, "batch", "add", open, "--file", more, "--seal"); !strings.HasPrefix(out, fmt.Sprintf("batch %s added to: 2 tasks (", open)) ||
		!strings.Contains(out, "3 members)") || strings.Contains(out, "(open") {
		t.Fatalf("keel batch add --seal:\n%s", out)
	}
	err = s.keelErr(t, "batch", "add", open, "--file", more)
	if !strings.Contains(err.Error(), "is sealed") || !strings.Contains(err.Error(), "HTTP 409") {
		t.Fatalf("add to a sealed batch: %v", err)
	}
	if out := s.keel(t, "batch", "list"); !regexp.MustCompile(`(?m)^` + m[1] + `\s+finished\s+2\s+2\s+0\s+0\s`).MatchString(out) {
		t.Fatalf("keel batch list:\n%s", out)
	}
	if l := decode[server.BatchList](t, s.keel(t, "batch", "list", "--json")); len(l.Batches) != 2 || l.Batches[0].ID != bt.Batch.ID {
		t.Fatalf("keel batch list --json: %+v", l)
	}
	if err := s.keelErr(t, "batch", "show", "0"); !strings.Contains(err.Error(), "batch id must be a positive integer") {
		t.Fatalf("keel batch show 0: %v", err)
	}
	if err := s.keelErr(t, "batch", "show", "999"); !strings.Contains(err.Error(), "batch 999 not found") {
		t.Fatalf("keel batch show 999: %v", err)
	}
}
