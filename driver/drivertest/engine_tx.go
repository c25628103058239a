package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

func testEngineEnqueueTx(t *testing.T, e *env) {
	db := e.db()
	var rec recorder
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		return nil
	})
	tx, err := db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueTx(e.ctx, tx, "dt.task", args{N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A task enqueued after it and run proves the worker looked.
	marker := e.enqueue(c, 2)
	e.waitState(marker.ID, driver.StateSucceeded)
	e.clock.Advance(time.Hour)
	time.Sleep(30 * time.Millisecond)
	if got := rec.list(); !slices.Equal(got, []int{2}) {
		t.Fatalf("handler runs %v: the rolled-back task ran", got)
	}
	if rows := e.all(); len(rows) != 1 || rows[0].ID != marker.ID {
		t.Fatalf("tasks after rollback: %v", ids(rows))
	}

	tx, err = db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := c.EnqueueManyTx(e.ctx, tx, []keel.TaskSpec{{Type: "dt.task", Payload: args{N: 3}}, {Type: "dt.task", Payload: args{N: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.waitState(infos[0].ID, driver.StateSucceeded)
	e.waitState(infos[1].ID, driver.StateSucceeded)
	if got := rec.list(); len(got) != 3 || slices.Contains(got, 1) {
		t.Fatalf("handler runs %v", got)
	}
}

// effects is the business table of the CompleteTx tests. Statements are
// built from integers only, so they need no placeholders and run on every
// database.
// The table has a name of its own per test, since tests on databases with
// schemas may share one default schema.
func (e *env) createEffects() {
	e.t.Helper()
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	e.effectsTable = "drivertest_effects_" + hex.EncodeToString(b[:])
	if _, err := e.db().ExecContext(e.ctx, `CREATE TABLE `+e.effectsTable+` (task_id BIGINT NOT NULL, attempt INT NOT NULL)`); err != nil {
		e.t.Fatalf("create effects table: %v", err)
	}
	e.t.Cleanup(func() {
		if _, err := e.db().ExecContext(context.Background(), `DROP TABLE `+e.effectsTable); err != nil {
			e.t.Errorf("drop effects table: %v", err)
		}
	})
}

func (e *env) effects(id int64) int {
	e.t.Helper()
	var n int
	if err := e.db().QueryRowContext(e.ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE task_id = %d`, e.effectsTable, id)).Scan(&n); err != nil {
		e.t.Fatalf("count effects: %v", err)
	}
	return n
}

// applyEffect writes the task's effect and completes it in one
// transaction, committed when commit is set; it returns CompleteTx's error.
func (e *env) applyEffect(ctx context.Context, task *keel.Task[args], result any, commit bool) error {
	tx, err := e.db().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (task_id, attempt) VALUES (%d, %d)`, e.effectsTable, task.ID, task.Attempt)); err != nil {
		return err
	}
	if err := keel.CompleteTx(ctx, tx, result); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

func testEngineCompleteTx(t *testing.T, e *env) {
	e.createEffects()
	if err := keel.CompleteTx(e.ctx, nil, nil); !errors.Is(err, keel.ErrNotInHandler) {
		t.Fatalf("CompleteTx outside a handler: %v, want ErrNotInHandler", err)
	}
	c := e.worker(keel.Config{BackoffBase: time.Minute}, func(ctx context.Context, task *keel.Task[args]) error {
		if task.Attempt == 1 {
			if err := e.applyEffect(ctx, task, "first", false); err != nil {
				return err
			}
			return errors.New("rolled back on purpose")
		}
		return e.applyEffect(ctx, task, map[string]int{"attempt": task.Attempt}, true)
	})
	info := e.enqueue(c, 1)
	row := e.waitErrors(info.ID, 1)
	if row.State != driver.StatePending || row.Result != nil || e.effects(info.ID) != 0 {
		t.Fatalf("rolled-back CompleteTx: state %s result %s effects %d", row.State, row.Result, e.effects(info.ID))
	}
	e.clock.Advance(time.Minute)
	row = e.waitState(info.ID, driver.StateSucceeded)
	e.stop(c)
	if n := e.effects(info.ID); n != 1 || !jsonEqual(row.Result, []byte(`{"attempt":2}`)) || row.Attempt != 2 || len(row.Errors) != 1 {
		t.Fatalf("committed CompleteTx: effects %d result %s attempt %d errors %d", n, row.Result, row.Attempt, len(row.Errors))
	}
}
