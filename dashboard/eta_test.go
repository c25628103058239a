package dashboard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestTaskPageBraked: the page of a task whose type's brake is open says
// when the brake's next probe is due.
func TestTaskPageBraked(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		now := time.Now().UTC().Truncate(time.Second)
		until := now.Add(10 * time.Minute)
		if ok, err := b.drv.(driver.Braker).ChangeBrake(t.Context(), driver.BrakeChange{To: driver.BrakeRow{Type: typeReport, State: driver.BrakeOpen,
			OpenedAt: now, Until: until, Ratio: 0.6, Attempts: 20, Reason: "12 of the last 20 attempts failed"},
			From: []driver.BrakeState{driver.BrakeClosed}, Now: now}); err != nil || !ok {
			t.Fatalf("open brake: %v %v", ok, err)
		}
		task, err := b.client.Enqueue(t.Context(), typeReport, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := b.do(t, "GET", fmt.Sprintf("/tasks/%d", task.ID), readToken, nil)
		want := "its type's automatic brake is open, the next probe is due in 9m"
		if !strings.Contains(r.body, want) || !strings.Contains(r.body, "("+stamp(until)+"); it starts after a probe task succeeds.") {
			i := strings.Index(r.body, `id="task-eta"`)
			t.Fatalf("task page: no %q and %s in %s", want, stamp(until), r.body[max(i, 0):min(max(i, 0)+400, len(r.body))])
		}
	})
}
