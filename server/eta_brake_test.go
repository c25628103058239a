package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// TestETABraked: a pending task of a braked type says when the brake's
// next probe is due, on every database: while the brake is open, its
// cooldown's end (Until), in POST /v1/tasks, the batch, GET
// /v1/tasks/{id} and Client.Estimate; once half open, that probes run now
// (brake_state half_open, next_probe_at the time of the answer). A task of
// another type, first in line, is estimated as usual, and once the brake
// closes the braked type's tasks are no longer braked.
func TestETABraked(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		// The estimates' snapshot lives a second: the test moves its clock
		// on instead of waiting.
		var skew atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		later := func() { skew.Add(int64(2 * time.Second)) }
		b := setup(t, db, Options{}, func(c *keel.Config) { c.Now = clock })
		b.workerElsewhere(t)
		ctx := context.Background()
		braker := b.drv.(driver.Braker)
		opened := clock().UTC().Truncate(time.Millisecond)
		until := opened.Add(time.Minute)
		if ok, err := braker.ChangeBrake(ctx, driver.BrakeChange{To: driver.BrakeRow{Type: typeReport, State: driver.BrakeOpen,
			OpenedAt: opened, Until: until, Ratio: 0.8, Attempts: 20, Reason: "16 of the last 20 attempts failed"},
			From: []driver.BrakeState{driver.BrakeClosed}, Now: opened}); err != nil || !ok {
			t.Fatalf("open: %v %v", ok, err)
		}
		open := func(what string, task Task) {
			t.Helper()
			if task.ETAStatus != string(keel.ETABraked) || task.BrakeState != "open" || task.NextProbeAt == nil ||
				!task.NextProbeAt.Equal(until) || task.ETA != nil {
				t.Fatalf("%s: eta_status %q, brake_state %q, next_probe_at %v, eta %v; want braked, open, %v",
					what, task.ETAStatus, task.BrakeState, task.NextProbeAt, task.ETA, until)
			}
		}
		report := b.enqueue(t, fmt.Sprintf(`{"type":%q}`, typeReport))
		open("POST /v1/tasks", report)
		var got Task
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", report.ID), "").ok(t, http.StatusOK, &got)
		open("GET /v1/tasks/{id}", got)
		var batch BatchResponse
		b.call(t, "POST", "/v1/tasks/batch", fmt.Sprintf(`{"tasks":[{"type":%q},{"type":%q,"priority":5},{"type":%q}]}`, typeReport, typeEmail, typeReport)).
			ok(t, http.StatusCreated, &batch)
		open("batch task 0", batch.Tasks[0])
		open("batch task 2", batch.Tasks[2])
		if e := batch.Tasks[1]; e.ETAStatus != string(keel.ETAEstimated) || e.ETA == nil || e.BrakeState != "" || e.NextProbeAt != nil {
			t.Fatalf("a task of another type: %+v", e)
		}
		info, err := b.client.Get(ctx, report.ID)
		if err != nil {
			t.Fatal(err)
		}
		e, err := b.client.Estimate(ctx, info)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != keel.ETABraked || e.Brake != keel.BrakeOpen || !e.NextProbe.Equal(until) || !e.Start.IsZero() {
			t.Fatalf("Estimate: %+v, want braked, open, next probe %v", e, until)
		}

		// Half open: its probes run now.
		if ok, err := braker.ChangeBrake(ctx, driver.BrakeChange{To: driver.BrakeRow{Type: typeReport, State: driver.BrakeHalfOpen,
			OpenedAt: opened, Until: until, Ratio: 0.8, Attempts: 20, Reason: "cooldown over"},
			From: []driver.BrakeState{driver.BrakeOpen}, Now: clock()}); err != nil || !ok {
			t.Fatalf("half open: %v %v", ok, err)
		}
		later()
		before := clock()
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", report.ID), "").ok(t, http.StatusOK, &got)
		after := clock()
		if got.ETAStatus != string(keel.ETABraked) || got.BrakeState != "half_open" || got.NextProbeAt == nil ||
			got.NextProbeAt.Before(before) || got.NextProbeAt.After(after) || got.ETA != nil {
			t.Fatalf("half open: eta_status %q, brake_state %q, next_probe_at %v; want braked, half_open, between %v and %v",
				got.ETAStatus, got.BrakeState, got.NextProbeAt, before, after)
		}

		// Closed: estimated like any other.
		if _, err := b.client.CloseBrake(ctx, typeReport); err != nil {
			t.Fatal(err)
		}
		later()
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", report.ID), "").ok(t, http.StatusOK, &got)
		if got.ETAStatus == string(keel.ETABraked) || got.BrakeState != "" || got.NextProbeAt != nil {
			t.Fatalf("closed: eta_status %q, brake_state %q, next_probe_at %v", got.ETAStatus, got.BrakeState, got.NextProbeAt)
		}
	})
}
