package batch_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
	ibatch "github.com/keelq/keel/internal/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns an enqueue-only client over a fresh SQLite database that
// knows the types "t.member" and "t.done".
func setup(t *testing.T) *keel.Client {
	t.Helper()
	drv, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"t.member", "t.done"},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEventIsTheCallbackPayload: Event, the public type a callback's
// handler decodes, reads every field of the payload the finisher writes
// (internal/batch.Event), and writes it back the same.
func TestEventIsTheCallbackPayload(t *testing.T) {
	pub, in := reflect.TypeFor[batch.Event](), reflect.TypeFor[ibatch.Event]()
	if pub.NumField() != in.NumField() {
		t.Fatalf("batch.Event has %d fields, internal/batch.Event %d", pub.NumField(), in.NumField())
	}
	for i := range pub.NumField() {
		if p, f := pub.Field(i), in.Field(i); p.Name != f.Name || p.Tag != f.Tag || p.Type != f.Type {
			t.Errorf("field %d: batch.Event %s %v %q, internal/batch.Event %s %v %q", i, p.Name, p.Type, p.Tag, f.Name, f.Type, f.Tag)
		}
	}
	doc := []byte(`{"queue":"default","type":"t","payload":{"to":"x"},"max_attempts":3,"timeout_ms":1000}`)
	p, err := ibatch.Build(ibatch.OnFinish, doc, &driver.BatchRow{ID: 7, Total: 5}, driver.BatchCounts{Succeeded: 4, Dead: 1}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var ev batch.Event
	if err := json.Unmarshal(p.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.BatchID != 7 || ev.Kind != "on_finish" || ev.Total != 5 || ev.Succeeded != 4 || ev.Dead != 1 || string(ev.Data) != `{"to":"x"}` {
		t.Fatalf("decoded %+v (data %s)", ev, ev.Data)
	}
	if p.IdemKey != ibatch.Key(7, ibatch.OnFinish) || p.Type != "t" || p.MaxAttempts != 3 || p.Timeout != time.Second {
		t.Fatalf("callback task %+v", p)
	}
}

// TestCalls: an open batch takes members, shows them by state, pages
// through them, is listed and sealed; bad calls return keel's errors and
// write nothing. (driver/drivertest runs batches to their callbacks on
// every driver.)
func TestCalls(t *testing.T) {
	c := setup(t)
	ctx := t.Context()
	members := func(n int) []keel.TaskSpec {
		out := make([]keel.TaskSpec, n)
		for i := range out {
			out[i] = keel.TaskSpec{Type: "t.member", Payload: map[string]int{"n": i}}
		}
		return out
	}
	b, first, err := batch.Enqueue(ctx, c, batch.Spec{Tasks: members(2), Open: true, OnFinish: &keel.TaskSpec{Type: "t.done"}})
	if err != nil {
		t.Fatal(err)
	}
	if b.State != batch.Open || b.Total != 2 || b.Pending != 2 || len(first) != 2 || first[0].BatchID != b.ID {
		t.Fatalf("created %+v with %d members", b, len(first))
	}
	more, err := batch.Add(ctx, c, b.ID, members(3), false)
	if err != nil || len(more) != 3 || more[2].BatchID != b.ID {
		t.Fatalf("Add: %v, %d members", err, len(more))
	}
	got, err := batch.Get(ctx, c, b.ID)
	if err != nil || got.State != batch.Open || got.Total != 5 || got.Pending != 5 || got.Progress != 0 {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	var ids []int64
	for after := int64(0); ; {
		page, err := batch.Members(ctx, c, b.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			ids = append(ids, m.ID)
		}
		after = page[len(page)-1].ID
	}
	if want := []int64{first[0].ID, first[1].ID, more[0].ID, more[1].ID, more[2].ID}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("members %v, want %v", ids, want)
	}
	sealed, err := batch.Seal(ctx, c, b.ID)
	if err != nil || sealed.State != batch.Running || sealed.SealedAt.IsZero() {
		t.Fatalf("Seal: %+v, %v", sealed, err)
	}
	if _, err := batch.Add(ctx, c, b.ID, members(1), false); !errors.Is(err, keel.ErrWrongState) {
		t.Fatalf("Add to a sealed batch: %v, want ErrWrongState", err)
	}
	list, err := batch.List(ctx, c, batch.Filter{Unfinished: true})
	if err != nil || len(list) != 1 || list[0].ID != b.ID || list[0].Total != 5 {
		t.Fatalf("List: %v, %v", list, err)
	}
	for name, call := range map[string]func() error{
		"Get":  func() error { _, err := batch.Get(ctx, c, b.ID+100); return err },
		"Seal": func() error { _, err := batch.Seal(ctx, c, b.ID+100); return err },
		"Add":  func() error { _, err := batch.Add(ctx, c, b.ID+100, members(1), false); return err },
	} {
		if err := call(); !errors.Is(err, keel.ErrNotFound) {
			t.Errorf("%s of no batch: %v, want ErrNotFound", name, err)
		}
	}
	if page, err := batch.Members(ctx, c, b.ID+100, 0, 10); err != nil || len(page) != 0 {
		t.Errorf("Members of no batch: %d, %v; want none", len(page), err)
	}
	if _, err := batch.Members(ctx, c, b.ID, 0, 0); !errors.Is(err, keel.ErrInvalid) {
		t.Errorf("Members with limit 0: %v, want ErrInvalid", err)
	}
	for name, s := range map[string]batch.Spec{
		"no tasks":         {},
		"unknown type":     {Tasks: []keel.TaskSpec{{Type: "t.nobody"}}},
		"unknown callback": {Tasks: members(1), OnSuccess: &keel.TaskSpec{Type: "t.nobody"}},
	} {
		if _, _, err := batch.Enqueue(ctx, c, s); !errors.Is(err, keel.ErrInvalid) && !errors.Is(err, keel.ErrUnknownType) {
			t.Errorf("%s: %v, want ErrInvalid or ErrUnknownType", name, err)
		}
	}
	if _, err := batch.List(ctx, c, batch.Filter{Limit: 1001}); !errors.Is(err, keel.ErrInvalid) {
		t.Errorf("List with limit 1001: %v, want ErrInvalid", err)
	}
	if list, err := batch.List(ctx, c, batch.Filter{}); err != nil || len(list) != 1 {
		t.Fatalf("after the bad calls: %d batches, %v; want 1", len(list), err)
	}
}
