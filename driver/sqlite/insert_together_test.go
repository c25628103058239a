package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

func insertParams(key, digest string, now time.Time) driver.InsertParams {
	return driver.InsertParams{Queue: "default", Type: "t", Payload: []byte(`{"n":1}`), MaxAttempts: 3,
		RunAt: now, Timeout: time.Minute, Now: now, IdemKey: key, PayloadDigest: digest}
}

// runBatch runs ops as one writer batch, as the writer does.
func runBatch(t *testing.T, d *Driver, ops ...*op) error {
	t.Helper()
	tx, err := d.wdb.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d.run(tx, ops)
}

func insertOp(out *[]driver.InsertResult, params ...driver.InsertParams) *op {
	o := &op{ins: params, res: out}
	o.fn = func(querier) error { return errors.New("run alone: the batch should have inserted it with the others") }
	return o
}

// TestInsertTogether: a batch's Inserts go through one insert call, each
// gets its own results in its own order, a key held twice in the batch
// makes one task and a duplicate, the batch's other operations still run,
// and a conflicting key fails the whole batch with nothing written.
func TestInsertTogether(t *testing.T) {
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "keel.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)

	var a, b, c []driver.InsertResult
	ran := false
	other := &op{fn: func(querier) error { ran = true; return nil }}
	err = runBatch(t, d,
		insertOp(&a, insertParams("", "d0", now), insertParams("k:x", "dx", now), insertParams("", "d1", now)),
		other,
		insertOp(&b, insertParams("k:shared", "ds", now)),
		insertOp(&c, insertParams("k:shared", "ds", now), insertParams("", "d2", now)))
	if err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the batch's other operation did not run")
	}
	if len(a) != 3 || len(b) != 1 || len(c) != 2 {
		t.Fatalf("results %d, %d, %d, want 3, 1, 2", len(a), len(b), len(c))
	}
	for i, want := range []string{"d0", "dx", "d1"} {
		if a[i].Task.PayloadDigest != want || a[i].Duplicate {
			t.Fatalf("a[%d] = %+v, want the task of digest %s", i, a[i], want)
		}
	}
	switch {
	case b[0].Duplicate == c[0].Duplicate || b[0].Task.ID != c[0].Task.ID:
		t.Fatalf("shared key: %+v and %+v, want one task and one duplicate of it", b[0], c[0])
	case c[1].Task.PayloadDigest != "d2" || c[1].Duplicate:
		t.Fatalf("c[1] = %+v", c[1])
	}
	ids := map[int64]bool{}
	for _, r := range append(append(a, b...), c[1]) {
		got, err := d.Get(context.Background(), r.Task.ID)
		if err != nil || got.PayloadDigest != r.Task.PayloadDigest || got.IdemKey != r.Task.IdemKey {
			t.Fatalf("task %d: stored %+v (%v), returned %+v", r.Task.ID, got, err, r.Task)
		}
		ids[r.Task.ID] = true
	}
	if len(ids) != 5 {
		t.Fatalf("%d distinct tasks, want 5", len(ids))
	}

	// One key, two digests: the batch fails and writes nothing (the
	// writer then runs each operation alone).
	var e, f []driver.InsertResult
	err = runBatch(t, d, insertOp(&e, insertParams("k:z", "d1", now)), insertOp(&f, insertParams("k:z", "d2", now)))
	if !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("conflicting batch: %v, want ErrIdempotencyConflict", err)
	}
	counts, err := d.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range counts {
		n += r.N
	}
	if n != 5 {
		t.Fatalf("%d tasks after the failed batch, want 5", n)
	}
}
