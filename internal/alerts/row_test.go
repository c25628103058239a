package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

func TestFiguresOf(t *testing.T) {
	fired, now := time.Unix(5, 0), time.Unix(9, 0)
	r := &driver.AlertRow{ID: 3, Message: "m", Values: json.RawMessage(`{"a":1}`), FiredAt: fired}
	want := Figures{Event: driver.AlertFired, Values: map[string]any{"a": 1.0}, CurrentMessage: "m",
		CurrentValues: map[string]any{"a": 1.0}, CurrentAt: fired}
	if got := FiguresOf(r, ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("open, never updated:\n got %+v\nwant %+v", got, want)
	}
	r.CurrentMessage, r.CurrentValues, r.CurrentAt, r.ResolvedAt = "cm", json.RawMessage(`{"b":2}`), now, now
	r.Deliveries = []driver.DeliveryRow{{AlertID: 3, Event: driver.AlertFired, Notifier: "chat", Attempts: 2, DeliveredAt: now,
		LastError: "e", UpdatedAt: now}}
	want.Event, want.CurrentMessage, want.CurrentValues, want.CurrentAt = driver.AlertResolved, "cm", map[string]any{"b": 2.0}, now
	want.Deliveries = []Delivery{{Event: driver.AlertFired, Notifier: "chat", Attempts: 2, DeliveredAt: now, LastError: "e"}}
	if got := FiguresOf(r, ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("resolved, updated:\n got %+v\nwant %+v", got, want)
	}
	r.CurrentValues = nil
	want.Event, want.CurrentValues = driver.AlertFired, nil
	if got := FiguresOf(r, driver.AlertFired); !reflect.DeepEqual(got, want) {
		t.Fatalf("the fired event of a resolved alert, updated without values:\n got %+v\nwant %+v", got, want)
	}
}

// inserter is a fake driver's Insert.
type inserter struct {
	params []driver.InsertParams
	dup    bool
	err    error
}

func (s *inserter) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	s.params = append(s.params, params...)
	if s.err != nil {
		return nil, s.err
	}
	return []driver.InsertResult{{Task: &driver.TaskRow{ID: 1, Queue: params[0].Queue}, Duplicate: s.dup}}, nil
}

func TestTaskInsert(t *testing.T) {
	ctx, now := context.Background(), time.Unix(100, 0)
	task := Task{Type: NotifyType("chat"), Payload: map[string]int{"alert_id": 1}, Key: "k", MaxAttempts: 3}
	var wrote []*driver.TaskRow
	s := &inserter{}
	if err := task.Insert(ctx, s, now, func(r *driver.TaskRow) { wrote = append(wrote, r) }); err != nil {
		t.Fatal(err)
	}
	if p := s.params[0]; p.Queue != Queue || p.Type != "keel.notify.chat" || !p.RunAt.Equal(now) || p.IdemKey == "" {
		t.Fatalf("inserted %+v", p)
	}
	if len(wrote) != 1 {
		t.Fatalf("wrote told %d times, want once", len(wrote))
	}
	s.dup = true
	if err := task.Insert(ctx, s, now, func(r *driver.TaskRow) { wrote = append(wrote, r) }); err != nil || len(wrote) != 1 {
		t.Fatalf("a duplicate: %v, wrote told %d times, want not again", err, len(wrote))
	}
	s.err = errors.New("down")
	if err := task.Insert(ctx, s, now, nil); err != s.err {
		t.Fatalf("insert error: %v", err)
	}
	if err := (Task{Payload: func() {}}).Insert(ctx, s, now, nil); err == nil {
		t.Fatal("a payload that cannot be encoded was inserted")
	}
}
