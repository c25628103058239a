package drivertest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Broker sources (driver.SourceStore): rejected messages are stored once
// per source and digest, byte for byte, listed newest first, resolved once
// and deleted; reports are upserted per source and node.

func (e *env) sourceStore() driver.SourceStore {
	e.t.Helper()
	s, ok := e.drv.(driver.SourceStore)
	if !ok {
		e.t.Skip("driver does not implement driver.SourceStore")
	}
	return s
}

// rejected returns a valid message of source whose body is body.
func (e *env) rejected(source, body string) driver.RejectedParams {
	return driver.RejectedParams{
		Source: source, Type: "dt.order", Key: "/id", Reason: "body is not JSON",
		Body: []byte(body), Size: int64(len(body)), Digest: digestOf(body), ReceivedAt: e.clock.Now(),
	}
}

func (e *env) insertRejected(ps ...driver.RejectedParams) []driver.RejectedResult {
	e.t.Helper()
	res, err := e.sourceStore().InsertRejected(e.ctx, ps)
	if err != nil {
		e.t.Fatalf("insert rejected: %v", err)
	}
	if len(res) != len(ps) {
		e.t.Fatalf("insert rejected: %d results for %d messages", len(res), len(ps))
	}
	return res
}

func (e *env) listRejected(f driver.RejectedFilter) []int64 {
	e.t.Helper()
	rows, err := e.sourceStore().ListRejected(e.ctx, f)
	if err != nil {
		e.t.Fatalf("list rejected %+v: %v", f, err)
	}
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func wantIDs(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s: ids %v, want %v", what, got, want)
	}
}

func testSourcesRejectedRoundTrip(t *testing.T, e *env) {
	s := e.sourceStore()
	body := make([]byte, 0, 300)
	for i := range 256 {
		body = append(body, byte(i)) // 0x00, and bytes that are not UTF-8
	}
	body = append(body, 0xff, 0xfe, 0xc3, 0x28, 0x00, 0x00)
	received := start.Add(1234567 * time.Nanosecond) // stored to the microsecond
	p := driver.RejectedParams{
		Source: "orders", Type: "dt.order", Queue: "bulk", Key: "header:message-id", Reason: "body is not JSON: invalid character 'ÿ'",
		Body: body, Size: 9 << 20, Headers: []byte(`{"Content-Type":["application/octet-stream"],"x-ünïcode":["a\"b","c"]}`),
		Digest: digestOf("whole body"), ReceivedAt: received,
	}
	bare := e.rejected("orders", "")
	bare.Body = nil
	res := e.insertRejected(p, bare)
	if res[0].Duplicate || res[1].Duplicate || res[0].ID <= 0 || res[1].ID <= res[0].ID {
		t.Fatalf("results %+v: want two new rows, ids ascending", res)
	}
	got, err := s.GetRejected(e.ctx, res[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != res[0].ID || got.Source != p.Source || got.Type != p.Type || got.Queue != p.Queue || got.Key != p.Key ||
		got.Reason != p.Reason || got.Size != p.Size || !got.ReceivedAt.Equal(received.Truncate(time.Microsecond)) ||
		!got.ResubmittedAt.IsZero() || got.TaskID != 0 {
		t.Fatalf("row %+v\ndoes not match %+v", *got, p)
	}
	if !bytes.Equal(got.Body, body) {
		t.Fatalf("body of %d bytes came back as %d bytes %x", len(body), len(got.Body), got.Body)
	}
	if string(got.Headers) != string(p.Headers) {
		t.Fatalf("headers %s, want %s", got.Headers, p.Headers)
	}
	if got.ReceivedAt.Location() != time.UTC {
		t.Fatalf("received at %v, want UTC", got.ReceivedAt)
	}
	got, err = s.GetRejected(e.ctx, res[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Body == nil || len(got.Body) != 0 || got.Size != 0 || string(got.Headers) != "{}" || got.Queue != "" {
		t.Fatalf("bare message came back as %+v: want an empty body, headers {}", *got)
	}
	if _, err := s.GetRejected(e.ctx, res[1].ID+1000); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get unknown id: %v, want ErrNotFound", err)
	}
}

func testSourcesRejectedDuplicate(t *testing.T, e *env) {
	first := e.insertRejected(e.rejected("orders", "a"))[0]
	if first.Duplicate {
		t.Fatal("first insert is a duplicate")
	}
	// A redelivery (same source and digest) with other fields, a message
	// repeated within a batch, the same digest of other sources (trailing
	// space included: names compare byte by byte).
	again := e.rejected("orders", "a")
	again.Reason, again.Type = "other reason", "dt.other"
	res := e.insertRejected(again, e.rejected("orders", "b"), e.rejected("orders", "b"),
		e.rejected("refunds", "a"), e.rejected("orders ", "a"))
	if res[0] != (driver.RejectedResult{ID: first.ID, Duplicate: true}) {
		t.Fatalf("redelivery: %+v, want id %d duplicate", res[0], first.ID)
	}
	if res[1].Duplicate || res[2] != (driver.RejectedResult{ID: res[1].ID, Duplicate: true}) {
		t.Fatalf("repeated in one batch: %+v then %+v, want the second a duplicate of the first", res[1], res[2])
	}
	for i, r := range res[3:] {
		if r.Duplicate || r.ID == first.ID || r.ID == res[1].ID {
			t.Fatalf("same digest, source %d other: %+v, want a new row", i, r)
		}
	}
	got, err := e.sourceStore().GetRejected(e.ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != "body is not JSON" || got.Type != "dt.order" {
		t.Fatalf("the duplicate changed the stored row: %+v", *got)
	}
	wantIDs(t, "all", e.listRejected(driver.RejectedFilter{Limit: 100}), res[4].ID, res[3].ID, res[1].ID, first.ID)
	wantIDs(t, "source orders", e.listRejected(driver.RejectedFilter{Source: "orders", Limit: 100}), res[1].ID, first.ID)
	wantIDs(t, "source 'orders '", e.listRejected(driver.RejectedFilter{Source: "orders ", Limit: 100}), res[4].ID)
}

func testSourcesRejectedBadInput(t *testing.T, e *env) {
	s := e.sourceStore()
	bad := map[string]func(p *driver.RejectedParams){
		"no source":           func(p *driver.RejectedParams) { p.Source = "" },
		"long source":         func(p *driver.RejectedParams) { p.Source = strings.Repeat("s", 201) },
		"no type":             func(p *driver.RejectedParams) { p.Type = "" },
		"long key":            func(p *driver.RejectedParams) { p.Key = strings.Repeat("k", 1001) },
		"no reason":           func(p *driver.RejectedParams) { p.Reason = "" },
		"long reason":         func(p *driver.RejectedParams) { p.Reason = strings.Repeat("r", driver.MaxRejectedReason+1) },
		"reason not UTF-8":    func(p *driver.RejectedParams) { p.Reason = "bad \xff byte" },
		"reason with NUL":     func(p *driver.RejectedParams) { p.Reason = "nul \x00 byte" },
		"headers not UTF-8":   func(p *driver.RejectedParams) { p.Headers = []byte("{\"a\":[\"\xc3\x28\"]}") },
		"headers with NUL":    func(p *driver.RejectedParams) { p.Headers = []byte("{\"a\":[\"\x00\"]}") },
		"source not UTF-8":    func(p *driver.RejectedParams) { p.Source = "s\xff" },
		"size below the body": func(p *driver.RejectedParams) { p.Size = 0 },
		"short digest":        func(p *driver.RejectedParams) { p.Digest = p.Digest[:31] },
		"no receive time":     func(p *driver.RejectedParams) { p.ReceivedAt = time.Time{} },
		"year 999":            func(p *driver.RejectedParams) { p.ReceivedAt = time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC) },
		"body over the limit": func(p *driver.RejectedParams) {
			p.Body = make([]byte, driver.MaxRejectedBody+1)
			p.Size = int64(len(p.Body))
		},
	}
	for name, mod := range bad {
		p := e.rejected("orders", "bad "+name)
		mod(&p)
		// The bad message comes after a good one: the batch writes nothing.
		res, err := s.InsertRejected(e.ctx, []driver.RejectedParams{e.rejected("orders", "good"), p})
		if err == nil {
			t.Fatalf("%s: inserted %+v, want an error", name, res)
		}
	}
	wantIDs(t, "after bad batches", e.listRejected(driver.RejectedFilter{Limit: 1000}))
	// The good message was not stored: it is new now.
	if r := e.insertRejected(e.rejected("orders", "good"))[0]; r.Duplicate {
		t.Fatalf("good message of a failed batch was stored: %+v", r)
	}
	for _, f := range []driver.RejectedFilter{{Limit: 0}, {Limit: 1001}, {Limit: 10, Before: -1}} {
		if _, err := s.ListRejected(e.ctx, f); err == nil {
			t.Fatalf("list with %+v: no error", f)
		}
	}
}

func testSourcesRejectedConcurrent(t *testing.T, e *env) {
	const workers = 8
	results := make([][]driver.RejectedResult, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// Each batch holds the shared message and one of its own.
			ps := []driver.RejectedParams{e.rejected("orders", "shared"), e.rejected("orders", fmt.Sprint("own ", w))}
			if w%2 == 1 {
				ps[0], ps[1] = ps[1], ps[0]
			}
			results[w], errs[w] = e.sourceStore().InsertRejected(e.ctx, ps)
		})
	}
	wg.Wait()
	var shared int64
	firsts := 0
	for w := range workers {
		if errs[w] != nil {
			t.Fatalf("worker %d: %v", w, errs[w])
		}
		r := results[w][w%2]
		if !r.Duplicate {
			firsts++
		}
		if shared == 0 {
			shared = r.ID
		} else if r.ID != shared {
			t.Fatalf("worker %d got row %d for the shared message, another got %d", w, r.ID, shared)
		}
		if own := results[w][1-w%2]; own.Duplicate || own.ID == shared {
			t.Fatalf("worker %d: its own message %+v", w, own)
		}
	}
	if firsts != 1 {
		t.Fatalf("%d workers stored the shared message, want 1", firsts)
	}
	if got := e.listRejected(driver.RejectedFilter{Limit: 1000}); len(got) != workers+1 {
		t.Fatalf("%d rows, want %d", len(got), workers+1)
	}
}

func testSourcesRejectedList(t *testing.T, e *env) {
	s := e.sourceStore()
	var a, b []int64 // oldest first
	for i := range 5 {
		res := e.insertRejected(e.rejected("a", fmt.Sprint("a", i)), e.rejected("b", fmt.Sprint("b", i)))
		a, b = append(a, res[0].ID), append(b, res[1].ID)
	}
	now := e.clock.Advance(time.Minute)
	for _, id := range []int64{a[1], a[3], b[0]} {
		if ok, err := s.ResolveRejected(e.ctx, id, 100+id, now); err != nil || !ok {
			t.Fatalf("resolve %d: %v, %v", id, ok, err)
		}
	}
	wantIDs(t, "all", e.listRejected(driver.RejectedFilter{Limit: 1000}),
		b[4], a[4], b[3], a[3], b[2], a[2], b[1], a[1], b[0], a[0])
	wantIDs(t, "source a", e.listRejected(driver.RejectedFilter{Source: "a", Limit: 1000}), a[4], a[3], a[2], a[1], a[0])
	wantIDs(t, "source a, open", e.listRejected(driver.RejectedFilter{Source: "a", Open: true, Limit: 1000}), a[4], a[2], a[0])
	wantIDs(t, "open", e.listRejected(driver.RejectedFilter{Open: true, Limit: 1000}), b[4], a[4], b[3], b[2], a[2], b[1], a[0])
	wantIDs(t, "limit", e.listRejected(driver.RejectedFilter{Limit: 3}), b[4], a[4], b[3])
	wantIDs(t, "before", e.listRejected(driver.RejectedFilter{Before: a[2], Limit: 1000}), b[1], a[1], b[0], a[0])
	wantIDs(t, "unknown source", e.listRejected(driver.RejectedFilter{Source: "c", Limit: 1000}))

	// Paging source b, two at a time.
	var paged []int64
	before := int64(0)
	for range 10 {
		page := e.listRejected(driver.RejectedFilter{Source: "b", Before: before, Limit: 2})
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		before = page[len(page)-1]
	}
	wantIDs(t, "pages of b", paged, b[4], b[3], b[2], b[1], b[0])

	rows, err := s.ListRejected(e.ctx, driver.RejectedFilter{Source: "a", Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatalf("list: %v, %v", rows, err)
	}
	if r := rows[0]; r.ID != a[4] || string(r.Body) != "a4" || r.Source != "a" || r.Size != 2 || string(r.Headers) != "{}" {
		t.Fatalf("listed row %+v, want message a4 whole", r)
	}
}

func testSourcesRejectedResolveDelete(t *testing.T, e *env) {
	s := e.sourceStore()
	res := e.insertRejected(e.rejected("orders", "x"), e.rejected("orders", "y"))
	x, y := res[0].ID, res[1].ID
	at := start.Add(90*time.Second + 7*time.Microsecond)
	if ok, err := s.ResolveRejected(e.ctx, x, 41, at); err != nil || !ok {
		t.Fatalf("first resolve: %v, %v; want true", ok, err)
	}
	if ok, err := s.ResolveRejected(e.ctx, x, 42, at.Add(time.Hour)); err != nil || ok {
		t.Fatalf("second resolve: %v, %v; want false", ok, err)
	}
	got, err := s.GetRejected(e.ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if got.TaskID != 41 || !got.ResubmittedAt.Equal(at) {
		t.Fatalf("resolved row: task %d at %v, want the first record: task 41 at %v", got.TaskID, got.ResubmittedAt, at)
	}
	if ok, err := s.ResolveRejected(e.ctx, y+1000, 43, at); !errors.Is(err, driver.ErrNotFound) || ok {
		t.Fatalf("resolve unknown id: %v, %v; want ErrNotFound", ok, err)
	}
	if _, err := s.ResolveRejected(e.ctx, y, 0, at); err == nil {
		t.Fatal("resolve with task id 0: no error")
	}

	if err := s.DeleteRejected(e.ctx, x); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRejected(e.ctx, x); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get deleted: %v, want ErrNotFound", err)
	}
	if err := s.DeleteRejected(e.ctx, x); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("delete again: %v, want ErrNotFound", err)
	}
	if ok, err := s.ResolveRejected(e.ctx, x, 44, at); !errors.Is(err, driver.ErrNotFound) || ok {
		t.Fatalf("resolve deleted: %v, %v; want ErrNotFound", ok, err)
	}
	wantIDs(t, "after delete", e.listRejected(driver.RejectedFilter{Limit: 10}), y)
	// A deleted message stored again is a new row.
	if r := e.insertRejected(e.rejected("orders", "x"))[0]; r.Duplicate || r.ID == x {
		t.Fatalf("re-insert after delete: %+v", r)
	}
}

func testSourcesReport(t *testing.T, e *env) {
	s := e.sourceStore()
	r := driver.SourceReport{
		Source: "orders", Node: "n1", Kind: "rabbitmq", Type: "dt.order", State: "connecting",
		LastError: "dial tcp: connection refused «x»", Accepted: 1, Duplicate: 2, Rejected: 3, Nacked: 4,
		AckP50: 1500 * time.Microsecond, AckP99: 2 * time.Second, StartedAt: start, Now: start.Add(time.Second),
	}
	if err := s.ReportSource(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	r2 := r
	r2.Kind, r2.Type, r2.State, r2.LastError = "nats", "dt.other", "running", ""
	r2.Accepted, r2.Duplicate, r2.Rejected, r2.Nacked = 1000, 20, 30, 0
	r2.AckP50, r2.AckP99 = 3*time.Millisecond+4*time.Microsecond, 0
	r2.StartedAt, r2.Now = start.Add(time.Minute), start.Add(2*time.Minute+5*time.Microsecond)
	if err := s.ReportSource(e.ctx, r2); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListSources(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows after two reports of one source and node, want 1", len(rows))
	}
	got := rows[0]
	if got.SourceReport.Source != r2.Source || got.Node != r2.Node || got.Kind != r2.Kind || got.Type != r2.Type ||
		got.State != r2.State || got.LastError != r2.LastError || got.Accepted != r2.Accepted ||
		got.Duplicate != r2.Duplicate || got.Rejected != r2.Rejected || got.Nacked != r2.Nacked ||
		got.AckP50 != r2.AckP50 || got.AckP99 != r2.AckP99 || !got.StartedAt.Equal(r2.StartedAt) ||
		!got.UpdatedAt.Equal(r2.Now) {
		t.Fatalf("stored report %+v\nwant the second report %+v, updated at its now", got, r2)
	}
	if got.UpdatedAt.Location() != time.UTC || got.StartedAt.Location() != time.UTC {
		t.Fatalf("times %v, %v: want UTC", got.StartedAt, got.UpdatedAt)
	}
}

func testSourcesListOrder(t *testing.T, e *env) {
	s := e.sourceStore()
	// Byte order, not a locale's: upper case first, a trailing space is
	// its own name.
	keys := [][2]string{{"orders", "n2"}, {"b", "n1"}, {"orders", "n1"}, {"Zeta", "n1"}, {"orders ", "n1"}, {"orders", "N3"}}
	for i, k := range keys {
		err := s.ReportSource(e.ctx, driver.SourceReport{Source: k[0], Node: k[1], Kind: "nats", Type: "t", State: "running",
			Accepted: int64(i), StartedAt: start, Now: start})
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.ListSources(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%q/%q=%d", r.SourceReport.Source, r.Node, r.Accepted))
	}
	want := []string{`"Zeta"/"n1"=3`, `"b"/"n1"=1`, `"orders"/"N3"=5`, `"orders"/"n1"=2`, `"orders"/"n2"=0`, `"orders "/"n1"=4`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("sources\n got %v\nwant %v", got, want)
	}
	bad := []func(r *driver.SourceReport){
		func(r *driver.SourceReport) { r.Node = "" },
		func(r *driver.SourceReport) { r.State = strings.Repeat("s", 17) },
		func(r *driver.SourceReport) { r.Nacked = -1 },
		func(r *driver.SourceReport) { r.AckP99 = -time.Second },
		func(r *driver.SourceReport) { r.LastError = "bad \xff" },
		func(r *driver.SourceReport) { r.LastError = strings.Repeat("e", driver.MaxSourceError+1) },
		func(r *driver.SourceReport) { r.Now = time.Time{} },
	}
	for i, mod := range bad {
		r := driver.SourceReport{Source: "b", Node: "n1", Kind: "nats", Type: "t", State: "stopped", Accepted: 99, StartedAt: start, Now: start}
		mod(&r)
		if err := s.ReportSource(e.ctx, r); err == nil {
			t.Fatalf("bad report %d: no error", i)
		}
	}
	if rows, err := s.ListSources(e.ctx); err != nil || len(rows) != len(keys) || rows[1].Accepted != 1 || rows[1].State != "running" {
		t.Fatalf("after bad reports: %+v, %v; want them unchanged", rows, err)
	}
}
