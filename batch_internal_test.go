package keel

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/batch"
)

// TestBatchEventIsTheCallbackPayload: BatchEvent, the public type a
// callback's handler decodes, reads every field of the payload the
// finisher writes (internal/batch.Event), and writes it back the same.
func TestBatchEventIsTheCallbackPayload(t *testing.T) {
	pub, in := reflect.TypeFor[BatchEvent](), reflect.TypeFor[batch.Event]()
	if pub.NumField() != in.NumField() {
		t.Fatalf("BatchEvent has %d fields, batch.Event %d", pub.NumField(), in.NumField())
	}
	for i := range pub.NumField() {
		if p, f := pub.Field(i), in.Field(i); p.Name != f.Name || p.Tag != f.Tag || p.Type != f.Type {
			t.Errorf("field %d: BatchEvent %s %v %q, batch.Event %s %v %q", i, p.Name, p.Type, p.Tag, f.Name, f.Type, f.Tag)
		}
	}
	doc := []byte(`{"queue":"default","type":"t","payload":{"to":"x"},"max_attempts":3,"timeout_ms":1000}`)
	p, err := batch.Build(batch.OnFinish, doc, &driver.BatchRow{ID: 7, Total: 5}, driver.BatchCounts{Succeeded: 4, Dead: 1}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var ev BatchEvent
	if err := json.Unmarshal(p.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.BatchID != 7 || ev.Kind != "on_finish" || ev.Total != 5 || ev.Succeeded != 4 || ev.Dead != 1 || string(ev.Data) != `{"to":"x"}` {
		t.Fatalf("decoded %+v (data %s)", ev, ev.Data)
	}
	if p.IdemKey != batch.Key(7, batch.OnFinish) || p.Type != "t" || p.MaxAttempts != 3 || p.Timeout != time.Second {
		t.Fatalf("callback task %+v", p)
	}
}
