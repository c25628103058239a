package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

func testDriverIdempotency(t *testing.T, e *env) {
	key := func(k, digest string) func(*driver.InsertParams) {
		return func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = k, digest }
	}
	first := e.insert(key("k:a", "d1"))
	res, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key("k:a", "d1"))})
	if err != nil || len(res) != 1 || !res[0].Duplicate || res[0].Task.ID != first.ID {
		t.Fatalf("same key and digest: %+v, %v; want duplicate of %d", res, err, first.ID)
	}
	// Within one insert, the second of two equal keys is a duplicate of the first.
	res, err = e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key("k:b", "d1")), e.params(key("k:b", "d1")), e.params()})
	if err != nil || len(res) != 3 {
		t.Fatalf("batch insert: %v", err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[1].Task.ID != res[0].Task.ID || res[2].Duplicate {
		t.Fatalf("batch with a repeated key: dup %v %v %v ids %d %d", res[0].Duplicate, res[1].Duplicate, res[2].Duplicate, res[0].Task.ID, res[1].Task.ID)
	}
	// The key is held while running and after success.
	now := e.clock.Now()
	r := e.claimOne("w", now)
	if r.ID != first.ID {
		t.Fatalf("claimed %d, want %d", r.ID, first.ID)
	}
	for _, state := range []string{"running", "succeeded"} {
		res, err = e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key("k:a", "d1"))})
		if err != nil || !res[0].Duplicate || res[0].Task.ID != first.ID || string(res[0].Task.State) != state {
			t.Fatalf("resubmit while %s: %+v, %v", state, res, err)
		}
		e.finish("w", now, driver.Transition{ID: first.ID, Fence: 1, State: driver.StateSucceeded})
	}
	if e.total() != 3 {
		t.Fatalf("%d tasks, want 3", e.total())
	}
}

func testIdempotencyConflictWritesNothing(t *testing.T, e *env) {
	held := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:x", "d1" })
	conflict := e.params(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:x", "d2" })
	if _, err := e.drv.Insert(e.ctx, []driver.InsertParams{conflict}); !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("same key, other digest: %v, want ErrIdempotencyConflict", err)
	}
	// A batch with one conflict writes none of its tasks, before or after it.
	batch := []driver.InsertParams{
		e.params(func(p *driver.InsertParams) { p.Payload = []byte(`{"n":2}`) }),
		conflict,
		e.params(func(p *driver.InsertParams) { p.IdemKey = "k:y" }),
	}
	if _, err := e.drv.Insert(e.ctx, batch); !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("batch with a conflict: %v, want ErrIdempotencyConflict", err)
	}
	rows := e.all()
	if len(rows) != 1 || rows[0].ID != held.ID || e.total() != 1 {
		t.Fatalf("a failed insert wrote tasks: %v", ids(rows))
	}
	// The key k:y was not taken by the failed batch.
	if r := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:y", "other" }); r == nil {
		t.Fatal("k:y unusable")
	}
}

func testKeyReleased(t *testing.T, e *env) {
	key := func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:r", "d1" }
	now := e.clock.Now()
	dead := e.insert(key)
	e.claimOne("w", now)
	e.finish("w", now, driver.Transition{ID: dead.ID, Fence: 1, State: driver.StateDead, Error: attemptError(1, "w", now, now, "x")})
	// After dead, even other content may use the key: it is new work.
	second := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:r", "d2" })
	if second.ID == dead.ID || second.State != driver.StatePending {
		t.Fatalf("resubmission after dead: %+v", second)
	}
	if _, err := e.drv.Cancel(e.ctx, second.ID, now); err != nil {
		t.Fatal(err)
	}
	third := e.insert(key)
	if third.ID == second.ID || third.ID == dead.ID {
		t.Fatalf("resubmission after cancel returned an old task %d", third.ID)
	}
	if e.total() != 3 {
		t.Fatalf("%d tasks, want 3", e.total())
	}
}

func testInsertTx(t *testing.T, e *env) {
	db := e.db()
	tx, err := db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.drv.InsertTx(e.ctx, tx, []driver.InsertParams{e.params(), e.params(func(p *driver.InsertParams) { p.IdemKey = "k:tx" })})
	if err != nil || len(res) != 2 {
		t.Fatalf("insert in tx: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := e.total(); n != 0 {
		t.Fatalf("%d tasks after rollback", n)
	}
	if _, err := e.drv.Get(e.ctx, res[0].Task.ID); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("rolled-back task: %v, want ErrNotFound", err)
	}
	if rows := e.claim("w", e.clock.Now().Add(time.Hour), 10); len(rows) != 0 {
		t.Fatalf("claimed rolled-back tasks %v", ids(rows))
	}
	// The rolled-back key is free; a committed insert exists and holds it.
	tx, err = db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = e.drv.InsertTx(e.ctx, tx, []driver.InsertParams{e.params(func(p *driver.InsertParams) { p.IdemKey = "k:tx" })})
	if err != nil || res[0].Duplicate {
		t.Fatalf("insert in tx after rollback: %+v, %v", res, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := e.get(res[0].Task.ID); got.State != driver.StatePending || got.IdemKey != "k:tx" {
		t.Fatalf("committed task: %+v", got)
	}
	dup, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(func(p *driver.InsertParams) { p.IdemKey = "k:tx" })})
	if err != nil || !dup[0].Duplicate || dup[0].Task.ID != res[0].Task.ID {
		t.Fatalf("key of a committed tx insert not held: %+v, %v", dup, err)
	}
}

// testInsertTxConflict: an InsertTx that fails leaves nothing of its own in
// the caller's transaction, so a caller that commits its other work anyway
// does not commit half a batch.
func testInsertTxConflict(t *testing.T, e *env) {
	db := e.db()
	held := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:held", "d1" })
	tx, err := db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	_, err = e.drv.InsertTx(e.ctx, tx, []driver.InsertParams{
		e.params(func(p *driver.InsertParams) { p.Payload = []byte(`{"n":2}`) }),
		e.params(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:held", "d2" }),
	})
	if !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("InsertTx with a conflict: %v, want ErrIdempotencyConflict", err)
	}
	// The caller decides the conflict is fine and commits its other work.
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit after a failed InsertTx: %v", err)
	}
	if rows := e.all(); len(rows) != 1 || rows[0].ID != held.ID {
		t.Fatalf("a failed InsertTx committed part of its batch: tasks %v", ids(rows))
	}
}
