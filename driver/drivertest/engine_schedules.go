package drivertest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// Periodic tasks through the client: the leader enqueues each tick once,
// the missed-tick policies, pause, resume and trigger. The fake clock
// moves; the leader's loop runs every second of real time and reads it.

// scheduleWorker starts a client leading the test's database with the
// given schedules and a "dt.task" handler that records its payloads.
func (e *env) scheduleWorker(rec *recorder, schedules ...keel.Schedule) *keel.Client {
	e.t.Helper()
	return e.worker(keel.Config{Schedules: schedules}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		return nil
	})
}

// waitLastTick waits until schedule name's last tick is at.
func (e *env) waitLastTick(name string, at time.Time) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("schedule %s's last tick at %v", name, at), func() bool {
		s, err := e.drv.GetSchedule(e.ctx, name)
		return err == nil && s.LastTick.Equal(at)
	})
}

// scheduleTasks returns the tasks of schedule name by their tick's key.
func (e *env) scheduleTasks(name string) []driver.TaskRow {
	e.t.Helper()
	var out []driver.TaskRow
	for _, r := range e.all() {
		if metaOf(r.Meta)["keel.schedule"] == name {
			out = append(out, r)
		}
	}
	return out
}

// metaOf decodes a task's meta (jsonb on PostgreSQL reformats it).
func metaOf(raw []byte) map[string]any {
	var m map[string]any
	json.Unmarshal(raw, &m) //nolint:errcheck // no meta: an empty map
	return m
}

// tickOf returns the task of schedule name's tick at, or nil.
func (e *env) tickOf(c *keel.Client, name string, at time.Time) *keel.TaskInfo {
	e.t.Helper()
	info, err := c.GetByKey(e.ctx, fmt.Sprintf("keel.schedule:%s:%d", name, at.Unix()))
	if err != nil {
		return nil
	}
	return info
}

// testEngineScheduleRunOnce: a new schedule does not backfill; each tick
// runs once; after five missed ticks one task runs, for the latest.
func testEngineScheduleRunOnce(t *testing.T, e *env) {
	rec := &recorder{}
	c := e.scheduleWorker(rec, keel.Schedule{Name: "m", Spec: "@every 1m", Type: "dt.task", Payload: args{N: 5}})
	e.waitLastTick("m", start)
	if n := len(e.scheduleTasks("m")); n != 0 {
		t.Fatalf("a new schedule enqueued %d tasks before its first tick", n)
	}
	e.clock.Advance(time.Minute)
	e.waitLastTick("m", start.Add(time.Minute))
	first := e.tickOf(c, "m", start.Add(time.Minute))
	if first == nil {
		t.Fatal("no task holds the first tick's key")
	}
	e.waitState(first.ID, driver.StateSucceeded)

	// Ticks at +2m .. +6m come due at once: one task, for +6m.
	e.clock.Advance(5*time.Minute + 30*time.Second)
	e.waitLastTick("m", start.Add(6*time.Minute))
	tasks := e.scheduleTasks("m")
	if len(tasks) != 2 {
		t.Fatalf("%d tasks after five missed ticks, want 2 (the first tick, one for the missed)", len(tasks))
	}
	if e.tickOf(c, "m", start.Add(6*time.Minute)) == nil {
		t.Fatal("the missed ticks' task is not the latest tick's")
	}
	e.clock.Advance(30 * time.Second)
	e.waitLastTick("m", start.Add(7*time.Minute))
	if n := len(e.scheduleTasks("m")); n != 3 {
		t.Fatalf("%d tasks, want 3", n)
	}
	waitFor(t, "three runs", func() bool { return rec.count() == 3 })
	for _, n := range rec.list() {
		if n != 5 {
			t.Fatalf("a tick ran with payload %d, want 5", n)
		}
	}
}

// testEngineScheduleSkip: under the skip policy, ticks found due longer
// than SkipGrace ago are passed over; a due tick on time runs.
func testEngineScheduleSkip(t *testing.T, e *env) {
	rec := &recorder{}
	c := e.scheduleWorker(rec, keel.Schedule{Name: "s", Spec: "@every 1m", Type: "dt.task", Missed: keel.MissedSkip})
	e.waitLastTick("s", start)
	e.clock.Advance(time.Minute)
	e.waitLastTick("s", start.Add(time.Minute))
	if n := len(e.scheduleTasks("s")); n != 1 {
		t.Fatalf("%d tasks for an on-time tick, want 1", n)
	}
	// +2m .. +6m missed, the latest 30s ago: none runs.
	e.clock.Advance(5*time.Minute + 30*time.Second)
	e.waitLastTick("s", start.Add(6*time.Minute))
	if n := len(e.scheduleTasks("s")); n != 1 {
		t.Fatalf("%d tasks after missed ticks under skip, want still 1", n)
	}
	// +7m .. +10m due, the latest right now: it runs, alone.
	e.clock.Advance(3*time.Minute + 30*time.Second)
	e.waitLastTick("s", start.Add(10*time.Minute))
	if n := len(e.scheduleTasks("s")); n != 2 || e.tickOf(c, "s", start.Add(10*time.Minute)) == nil {
		t.Fatalf("%d tasks, want 2 with one for the on-time tick +10m", n)
	}
}

// testEngineSchedulePauseTrigger: a paused schedule enqueues nothing (a
// running one beside it shows the leader looked); trigger enqueues one
// task without moving the ticks; a resume does not run the paused period.
func testEngineSchedulePauseTrigger(t *testing.T, e *env) {
	rec := &recorder{}
	c := e.scheduleWorker(rec,
		keel.Schedule{Name: "p", Spec: "@every 1m", Type: "dt.task", Payload: args{N: 1}},
		keel.Schedule{Name: "witness", Spec: "@every 1m", Type: "dt.task", Payload: args{N: 2}},
		keel.Schedule{Name: "berlin", Spec: "0 9 * * *", TimeZone: "Europe/Berlin", Type: "dt.other"})
	e.waitLastTick("p", start)
	info, err := c.PauseSchedule(e.ctx, "p")
	if err != nil || !info.Paused {
		t.Fatalf("pause: %+v %v", info, err)
	}
	e.clock.Advance(3 * time.Minute)
	e.waitLastTick("witness", start.Add(3*time.Minute))
	if n := len(e.scheduleTasks("p")); n != 0 {
		t.Fatalf("a paused schedule enqueued %d tasks", n)
	}
	task, err := c.TriggerSchedule(e.ctx, "p")
	if err != nil || task.Type != "dt.task" || metaOf(task.Meta)["keel.trigger"] != "manual" {
		t.Fatalf("trigger: %+v %v", task, err)
	}
	e.waitState(task.ID, driver.StateSucceeded)
	if got, _ := c.GetSchedule(e.ctx, "p"); !got.LastTick.Equal(start) || !got.Paused {
		t.Fatalf("trigger moved the schedule: %+v", got)
	}
	resumed, err := c.ResumeSchedule(e.ctx, "p")
	if err != nil || resumed.Paused || !resumed.LastTick.Equal(start.Add(3*time.Minute)) {
		t.Fatalf("resume: %+v %v, want last tick at the resume", resumed, err)
	}
	if want := start.Add(4 * time.Minute); !resumed.NextRun.Equal(want) {
		t.Fatalf("next run after the resume %v, want %v", resumed.NextRun, want)
	}
	e.clock.Advance(time.Minute)
	e.waitLastTick("p", start.Add(4*time.Minute))
	if n := len(e.scheduleTasks("p")); n != 2 { // the trigger's and +4m's
		t.Fatalf("%d tasks of p, want 2: the paused period ran", n)
	}

	// Next runs are shown in each schedule's zone: 09:00 in Berlin is
	// 08:00 UTC in March.
	list, err := c.Schedules(e.ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("schedules: %v %v", list, err)
	}
	b := list[0]
	if b.Name != "berlin" || b.NextRun.Location().String() != "Europe/Berlin" ||
		!b.NextRun.Equal(time.Date(2031, 3, 4, 8, 0, 0, 0, time.UTC)) || b.Due {
		t.Fatalf("berlin: next run %v (%v), due %v", b.NextRun, b.NextRun.Location(), b.Due)
	}

	for _, name := range []string{"nope", "bad name"} {
		if _, err := c.PauseSchedule(e.ctx, name); err == nil {
			t.Errorf("pause %q: no error", name)
		}
		if _, err := c.TriggerSchedule(e.ctx, name); err == nil {
			t.Errorf("trigger %q: no error", name)
		}
	}
}
