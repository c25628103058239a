package drivertest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/keelq/keel/driver"
)

// testBatchKeysOppositeOrders races two inserts that carry the same
// idempotency keys in opposite orders (two EnqueueMany calls, two POST
// /v1/tasks/batch). On PostgreSQL each took the keys' index entries in its
// own order and one died in a deadlock (SQLSTATE 40P01). Both must succeed,
// each key must name one task, and results keep the caller's order.
func testBatchKeysOppositeOrders(t *testing.T, e *env) {
	const rounds, keys = 25, 8
	for round := range rounds {
		var batch [2][]driver.InsertParams
		for i := range keys {
			k := fmt.Sprintf("race:%d:%d", round, i)
			p := e.params(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = k, "d:"+k })
			batch[0] = append(batch[0], p)
		}
		batch[1] = slices.Clone(batch[0])
		slices.Reverse(batch[1])
		var res [2][]driver.InsertResult
		var errs [2]error
		var wg sync.WaitGroup
		ready := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-ready
				res[i], errs[i] = e.drv.Insert(e.ctx, batch[i])
			})
		}
		close(ready)
		wg.Wait()
		byKey := map[string]int64{}
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("round %d: batch %d: %v", round, i, errs[i])
			}
			if len(res[i]) != keys {
				t.Fatalf("round %d: batch %d: %d results, want %d", round, i, len(res[i]), keys)
			}
			for j, r := range res[i] {
				if want := batch[i][j].IdemKey; r.Task == nil || r.Task.IdemKey != want {
					t.Fatalf("round %d: batch %d: result %d is %+v, want the task of key %s", round, i, j, r.Task, want)
				}
				id, seen := byKey[r.Task.IdemKey]
				if !seen {
					byKey[r.Task.IdemKey] = r.Task.ID
				} else if id != r.Task.ID {
					t.Fatalf("round %d: key %s names tasks %d and %d", round, r.Task.IdemKey, id, r.Task.ID)
				}
			}
		}
		for j := range keys {
			// Of the two results for a key, exactly one inserted it.
			if res[0][j].Duplicate == res[1][keys-1-j].Duplicate {
				t.Fatalf("round %d: key %s: duplicate %v and %v, want one insert", round, batch[0][j].IdemKey,
					res[0][j].Duplicate, res[1][keys-1-j].Duplicate)
			}
		}
	}
	if n := e.total(); n != rounds*keys {
		t.Fatalf("%d tasks, want %d", n, rounds*keys)
	}
}
