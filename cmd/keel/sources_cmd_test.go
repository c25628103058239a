package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/server"
)

// reject stores a rejected message as a source would and returns its id.
func (s *apiSetup) reject(t *testing.T, source, typ string, body []byte, reason, headers string) int64 {
	t.Helper()
	d := sha256.Sum256(body)
	res, err := s.drv.(driver.SourceStore).InsertRejected(t.Context(), []driver.RejectedParams{{Source: source, Type: typ, Key: "/id",
		Reason: reason, Body: body, Size: int64(len(body)), Headers: []byte(headers), Digest: d[:], ReceivedAt: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].ID
}

// TestSourcesAndStats: keel sources shows each report as a row, keel
// stats adds a sources section only when there are any.
func TestSourcesAndStats(t *testing.T) {
	s := newAPI(t, serverOpts{})
	if out := s.keel(t, "sources"); out != "no sources have reported\n" {
		t.Fatalf("keel sources without reports: %q", out)
	}
	if out := s.keel(t, "stats"); strings.Contains(out, "sources:") {
		t.Fatalf("keel stats shows a sources section without sources:\n%s", out)
	}
	now := time.Now()
	for _, r := range []driver.SourceReport{
		{Source: "orders", Node: "node-1", Kind: "rabbitmq", Type: "email", State: "running", Accepted: 120, Duplicate: 3, Rejected: 2,
			Nacked: 1, AckP50: 3 * time.Millisecond, AckP99: 1500 * time.Millisecond, StartedAt: now.Add(-time.Hour), Now: now},
		{Source: "events", Node: "node-1", Kind: "nats", Type: "report", State: "connecting", LastError: "nats: no servers available",
			StartedAt: now, Now: now},
	} {
		if err := s.drv.(driver.SourceStore).ReportSource(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	out := s.keel(t, "sources")
	if !regexp.MustCompile(`(?m)^SOURCE\s+NODE\s+KIND\s+TYPE\s+STATE\s+ACCEPTED\s+DUPLICATE\s+REJECTED\s+NACKED\s+ACK P50\s+ACK P99`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^orders\s+node-1\s+rabbitmq\s+email\s+running\s+120\s+3\s+2\s+1\s+3ms\s+1\.5s\s+\S+ ago\s+-$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^events\s+node-1\s+nats\s+report\s+connecting\s+0\s+0\s+0\s+0\s+-\s+-\s+.*nats: no servers available$`).MatchString(out) {
		t.Fatalf("keel sources:\n%s", out)
	}
	if l := decode[server.SourceList](t, s.keel(t, "sources", "--json")); len(l.Sources) != 2 || l.Sources[1].Accepted != 120 {
		t.Fatalf("keel sources --json: %+v", l)
	}
	out = s.keel(t, "stats")
	if !strings.Contains(out, "\nsources:\n") ||
		!regexp.MustCompile(`(?m)^orders\s+node-1\s+running\s+120\s+3\s+2\s+1\s+1\.5s$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^events\s+node-1\s+connecting\s+0\s+0\s+0\s+0\s+-$`).MatchString(out) {
		t.Fatalf("keel stats with sources:\n%s", out)
	}
	if st := decode[server.Stats](t, s.keel(t, "stats", "--json")); len(st.Sources) != 2 {
		t.Fatalf("keel stats --json: sources %+v", st.Sources)
	}
}

// TestRejectedCommands: list (filters, limit, all), show (reason, headers,
// text and binary bodies), resubmit (as stored, with a payload file or
// stdin and a key) and delete, and their errors.
func TestRejectedCommands(t *testing.T) {
	s := newAPI(t, serverOpts{})
	notJSON := s.reject(t, "orders", "email", []byte("id=7 to=a@example.com"), "body is not JSON", `{"content-type":["text/plain"],"x-trace":["t1","t2"]}`)
	binary := s.reject(t, "orders", "email", []byte{0xde, 0xad, 0x00}, "body is not JSON", `{}`)
	ready := s.reject(t, "events", "report", []byte(`{"id":"r-9"}`), "body of 12 bytes is over the limit of 4", `{}`)

	out := s.keel(t, "rejected", "list")
	if !regexp.MustCompile(`(?m)^ID\s+SOURCE\s+TYPE\s+RECEIVED\s+SIZE\s+STATUS\s+REASON\s+BODY$`).MatchString(out) ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+orders\s+email\s+.+\s+21\s+open\s+body is not JSON\s+"id=7 to=a@example.com"$`, notJSON)).MatchString(out) ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+orders\s+email\s+.+\s+3\s+open\s+body is not JSON\s+\(binary\)$`, binary)).MatchString(out) ||
		strings.Index(out, fmt.Sprintf("\n%d ", ready)) > strings.Index(out, fmt.Sprintf("\n%d ", notJSON)) {
		t.Fatalf("keel rejected list:\n%s", out)
	}
	out = s.keel(t, "rejected", "list", "--source", "events")
	if strings.Contains(out, "orders") || !strings.Contains(out, "events") {
		t.Fatalf("--source events:\n%s", out)
	}
	out = s.keel(t, "rejected", "list", "--limit", "2")
	if strings.Count(out, "body is not JSON")+strings.Count(out, "over the limit") != 2 || !strings.Contains(out, "(more messages match: raise --limit or use --all)") {
		t.Fatalf("--limit 2:\n%s", out)
	}
	if l := decode[server.RejectedList](t, s.keel(t, "rejected", "list", "--all", "--json")); len(l.Rejected) != 3 || l.Rejected[0].ID != ready {
		t.Fatalf("--all --json: %+v", l)
	}

	out = s.keel(t, "rejected", "show", fmt.Sprint(notJSON))
	for _, want := range []string{fmt.Sprintf("rejected message %d from source orders", notJSON), "reason     body is not JSON",
		"type email, queue the type's default, natural key /id", "status     open: keel rejected resubmit", "content-type: text/plain",
		"x-trace: t1, t2", "body (21 bytes):\nid=7 to=a@example.com\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("keel rejected show lacks %q:\n%s", want, out)
		}
	}
	if out := s.keel(t, "rejected", "show", fmt.Sprint(binary)); !strings.Contains(out, "body (3 bytes, not UTF-8 text: base64):\n3q0A\n") {
		t.Errorf("keel rejected show of a binary body:\n%s", out)
	}
	if m := decode[server.RejectedRecord](t, s.keel(t, "rejected", "show", fmt.Sprint(notJSON), "--json")); m.ID != notJSON || m.BodyEncoding != "text" {
		t.Fatalf("show --json: %+v", m)
	}
	// --body: the stored bytes and nothing else, text or binary; a body
	// stored only in part says so on stderr.
	if out := s.keel(t, "rejected", "show", fmt.Sprint(binary), "--body"); out != "\xde\xad\x00" {
		t.Errorf("show --body of a binary body: %q", out)
	}
	if out := s.keel(t, "rejected", "show", fmt.Sprint(notJSON), "--body"); out != "id=7 to=a@example.com" {
		t.Errorf("show --body of a text body: %q", out)
	}
	if err := s.keelErr(t, "rejected", "show", fmt.Sprint(binary), "--body", "--json"); !strings.Contains(err.Error(), "use one") {
		t.Errorf("--body with --json: %v", err)
	}
	cut, insertErr := s.drv.(driver.SourceStore).InsertRejected(t.Context(), []driver.RejectedParams{{Source: "orders", Type: "email",
		Key: "/id", Reason: "body of 9000000 bytes is over the limit", Body: []byte{1, 2, 3}, Size: 9000000,
		Headers: []byte(`{}`), Digest: bytes.Repeat([]byte{7}, 32), ReceivedAt: time.Now()}})
	if insertErr != nil {
		t.Fatal(insertErr)
	}
	cutOut, cutErrOut, runErr := keelCmd(t, "", "rejected", "show", fmt.Sprint(cut[0].ID), "--body", "--server", s.url)
	if runErr != nil || cutOut != "\x01\x02\x03" || !strings.Contains(cutErrOut, "only the first 3 of the message's 9000000 bytes were stored") {
		t.Errorf("show --body of a cut body: %q, stderr %q, err %v", cutOut, cutErrOut, runErr)
	}
	s.keel(t, "rejected", "delete", fmt.Sprint(cut[0].ID))

	// Resubmit: as stored; refused with the reason; with a payload file;
	// from stdin with a key.
	out = s.keel(t, "rejected", "resubmit", fmt.Sprint(ready))
	if !regexp.MustCompile(fmt.Sprintf(`^rejected message %d: enqueued task \d+ \(type report, queue default\)\n$`, ready)).MatchString(out) {
		t.Fatalf("resubmit: %q", out)
	}
	if out := s.keel(t, "rejected", "resubmit", fmt.Sprint(ready)); !strings.Contains(out, "already task") {
		t.Fatalf("second resubmit: %q", out)
	}
	if out := s.keel(t, "rejected", "show", fmt.Sprint(ready)); !strings.Contains(out, "status     resubmitted") {
		t.Fatalf("show after resubmit:\n%s", out)
	}
	err := s.keelErr(t, "rejected", "resubmit", fmt.Sprint(notJSON))
	if !strings.Contains(err.Error(), "cannot become a task") || !strings.Contains(err.Error(), "body is not JSON") || !strings.Contains(err.Error(), "HTTP 422") {
		t.Fatalf("resubmit of a non-JSON body: %v", err)
	}
	file := filepath.Join(t.TempDir(), "fixed.json")
	if err := os.WriteFile(file, []byte(`{"id":7,"to":"a@example.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = s.keel(t, "rejected", "resubmit", fmt.Sprint(notJSON), "--payload", file)
	if !strings.Contains(out, "enqueued task") {
		t.Fatalf("resubmit --payload: %q", out)
	}
	stdout, _, err := keelCmd(t, `{"raw":"dead00"}`, "rejected", "resubmit", fmt.Sprint(binary), "--payload", "-", "--key", "b-1", "--server", s.url)
	if err != nil || !strings.Contains(stdout, "enqueued task") {
		t.Fatalf("resubmit --payload - --key: %q %v", stdout, err)
	}
	if l := decode[server.RejectedList](t, s.keel(t, "rejected", "list", "--open", "--json")); len(l.Rejected) != 0 {
		t.Fatalf("open messages after resubmitting all: %+v", l.Rejected)
	}
	if err := s.keelErr(t, "rejected", "resubmit", fmt.Sprint(notJSON), "--payload", filepath.Join(t.TempDir(), "none.json")); !strings.Contains(err.Error(), "--payload") {
		t.Fatalf("missing payload file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.keelErr(t, "rejected", "resubmit", fmt.Sprint(notJSON), "--payload", bad); !strings.Contains(err.Error(), "is not valid JSON") {
		t.Fatalf("bad payload file: %v", err)
	}

	// Delete, then it is gone.
	if out := s.keel(t, "rejected", "delete", fmt.Sprint(binary)); out != fmt.Sprintf("rejected message %d from source orders: deleted\n", binary) {
		t.Fatalf("delete: %q", out)
	}
	if err := s.keelErr(t, "rejected", "show", fmt.Sprint(binary)); !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("show after delete: %v", err)
	}
	if err := s.keelErr(t, "rejected", "delete", "abc"); !strings.Contains(err.Error(), `rejected message id must be a positive integer, got "abc"`) {
		t.Fatalf("delete abc: %v", err)
	}
	if err := s.keelErr(t, "rejected", "list", "--limit", "0"); !strings.Contains(err.Error(), "--limit must be in 1..1000") {
		t.Fatalf("list --limit 0: %v", err)
	}
}

// TestRejectedReadToken: a read token lists but cannot resubmit.
func TestRejectedReadToken(t *testing.T) {
	const reader = "read-token-0123456789"
	s := newAPI(t, serverOpts{tokens: []server.Token{{Value: reader, Role: server.RoleRead}, {Value: "admin-token-0123456789", Role: server.RoleAdmin}}})
	id := s.reject(t, "orders", "email", []byte(`{"id":1}`), "body of 8 bytes is over the limit of 2", `{}`)
	if out := s.keel(t, "rejected", "list", "--token", reader); !strings.Contains(out, "over the limit") {
		t.Fatalf("list as reader:\n%s", out)
	}
	if err := s.keelErr(t, "rejected", "resubmit", fmt.Sprint(id), "--token", reader); !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("resubmit as reader: %v", err)
	}
}

// TestConfigCheckSources: keel config check shows each [[sources]] block
// with its password redacted, and names the block that is wrong.
func TestConfigCheckSources(t *testing.T) {
	clearKeelEnv(t)
	block := "[[sources]]\nname = \"orders\"\nkind = \"rabbitmq\"\nurl = \"amqp://keel:hunter2@127.0.0.1:5672/\"\nqueue = \"orders\"\ntype = \"email\"\nkey = \"/id\"\n"
	out, _, err := keelCmd(t, "", "config", "check", "--config", writeConfig(t, block))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "hunter2") || !regexp.MustCompile(`(?m)^sources\[0\]\s+name=orders kind=rabbitmq url=amqp://keel:xxxxx@127\.0\.0\.1:5672/ queue=orders type=email key=/id\s+file\s+url password redacted`).MatchString(out) {
		t.Fatalf("config check:\n%s", out)
	}
	_, _, err = keelCmd(t, "", "config", "check", "--config", writeConfig(t, block+strings.Replace(block, "rabbitmq", "kafka", 1)))
	if err == nil || !strings.Contains(err.Error(), `sources[1].name: "orders" is also the name of sources[0]`) ||
		!strings.Contains(err.Error(), `sources[1]: source "orders": kind "kafka"`) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("config check of bad blocks: %v", err)
	}
}
