package drivertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Periodic tasks' schedules (UpsertSchedules, ListSchedules, GetSchedule,
// PauseSchedule, DeleteSchedule, EnqueueTick). A tick is enqueued once:
// the compare-and-set on last_tick and the task's insert commit together.

func (e *env) schedule(name string, mod ...func(*driver.ScheduleParams)) driver.ScheduleParams {
	p := driver.ScheduleParams{Name: name, Spec: "@every 1m", TimeZone: "UTC", Type: "dt.task", Queue: "default",
		Payload: json.RawMessage(`{"n":7}`), Priority: 2, Missed: driver.MissedRunOnce, Now: e.clock.Now()}
	for _, m := range mod {
		m(&p)
	}
	return p
}

func (e *env) upsertSchedules(ps ...driver.ScheduleParams) {
	e.t.Helper()
	if err := e.drv.UpsertSchedules(e.ctx, ps); err != nil {
		e.t.Fatalf("upsert schedules: %v", err)
	}
}

func (e *env) getSchedule(name string) *driver.ScheduleRow {
	e.t.Helper()
	s, err := e.drv.GetSchedule(e.ctx, name)
	if err != nil {
		e.t.Fatalf("get schedule %s: %v", name, err)
	}
	return s
}

func (e *env) listSchedules() []driver.ScheduleRow {
	e.t.Helper()
	out, err := e.drv.ListSchedules(e.ctx)
	if err != nil {
		e.t.Fatalf("list schedules: %v", err)
	}
	return out
}

// tickTask is the task of schedule name's tick, keyed like the client's.
func (e *env) tickTask(name string, tick time.Time) *driver.InsertParams {
	p := e.params(func(p *driver.InsertParams) {
		p.IdemKey = fmt.Sprintf("keel.schedule:%s:%d", name, tick.Unix())
		p.Payload = []byte(`{"n":7}`)
	})
	return &p
}

func testScheduleUpsert(t *testing.T, e *env) {
	now := e.clock.Now().Add(400 * time.Millisecond) // a new schedule's last tick is its whole second
	e.upsertSchedules(e.schedule("b", func(p *driver.ScheduleParams) { p.Now = now }),
		e.schedule("a", func(p *driver.ScheduleParams) {
			p.Spec, p.TimeZone, p.Missed, p.Now = "*/5 * * * *", "Europe/Berlin", driver.MissedSkip, now
		}))
	list := e.listSchedules()
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("list = %+v, want a and b by name", list)
	}
	a := list[0]
	if a.Spec != "*/5 * * * *" || a.TimeZone != "Europe/Berlin" || a.Type != "dt.task" || a.Queue != "default" ||
		!jsonEqual(a.Payload, []byte(`{"n":7}`)) || a.Priority != 2 || a.Missed != driver.MissedSkip || a.Paused {
		t.Fatalf("stored a = %+v", a)
	}
	if !a.LastTick.Equal(start) || !a.CreatedAt.Equal(now) || !a.UpdatedAt.Equal(now) {
		t.Fatalf("a: last tick %v created %v updated %v, want %v, %v, %v", a.LastTick, a.CreatedAt, a.UpdatedAt, start, now, now)
	}

	// A new definition keeps the pause and, with the same spec and zone,
	// the last tick.
	if _, err := e.drv.PauseSchedule(e.ctx, driver.PauseScheduleParams{Name: "a", Paused: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	later := e.clock.Advance(time.Hour)
	e.upsertSchedules(e.schedule("a", func(p *driver.ScheduleParams) {
		p.Spec, p.TimeZone = "*/5 * * * *", "Europe/Berlin"
		p.Queue, p.Payload, p.Priority, p.Missed = "q2", json.RawMessage(`[1,2]`), -3, driver.MissedRunOnce
	}))
	a = *e.getSchedule("a")
	if a.Queue != "q2" || !jsonEqual(a.Payload, []byte(`[1,2]`)) || a.Priority != -3 ||
		a.Missed != driver.MissedRunOnce || !a.Paused || !a.LastTick.Equal(start) || !a.UpdatedAt.Equal(later) || !a.CreatedAt.Equal(now) {
		t.Fatalf("redefined a = %+v", a)
	}
	// A changed spec counts its ticks from the change: no tick of the
	// new spec between the last tick and now is due at once.
	for _, mod := range []func(p *driver.ScheduleParams){
		func(p *driver.ScheduleParams) { p.Spec, p.TimeZone = "@hourly", "Europe/Berlin" },
		func(p *driver.ScheduleParams) { p.Spec, p.TimeZone = "@hourly", "UTC" },
	} {
		at := e.clock.Advance(time.Hour + 300*time.Millisecond)
		e.upsertSchedules(e.schedule("a", mod))
		if a = *e.getSchedule("a"); !a.LastTick.Equal(at.Truncate(time.Second)) || !a.Paused {
			t.Fatalf("after a change of spec or zone: %+v, want last tick %v", a, at.Truncate(time.Second))
		}
	}
	// A stale process's upsert with an older time never moves it back.
	e.upsertSchedules(e.schedule("a", func(p *driver.ScheduleParams) { p.Spec, p.Now = "@daily", start }))
	if got := e.getSchedule("a").LastTick; got.Before(start.Add(2 * time.Hour)) {
		t.Fatalf("an older upsert moved the last tick back to %v", got)
	}

	if _, err := e.drv.GetSchedule(e.ctx, "nope"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get unknown: %v, want ErrNotFound", err)
	}
	if err := e.drv.DeleteSchedule(e.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.DeleteSchedule(e.ctx, "b"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("delete twice: %v, want ErrNotFound", err)
	}
	if got := e.listSchedules(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("after delete: %+v", got)
	}
}

// testScheduleTickOnce: eight callers race to enqueue the same tick; one
// advances last_tick and inserts its task, the others write nothing. A
// caller with a stale last tick writes nothing either.
func testScheduleTickOnce(t *testing.T, e *env) {
	e.upsertSchedules(e.schedule("s"))
	tick := start.Add(time.Minute)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		advanced int
		tasks    []int64
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, ok, err := e.drv.EnqueueTick(e.ctx, driver.TickParams{Name: "s", Prev: start, Tick: tick, Task: e.tickTask("s", tick), Now: e.clock.Now()})
			if err != nil {
				t.Errorf("enqueue tick: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				advanced++
				if res == nil || res.Duplicate {
					t.Errorf("the winner got %+v, want a new task", res)
					return
				}
				tasks = append(tasks, res.Task.ID)
			} else if res != nil {
				t.Errorf("a loser got a task %+v", res)
			}
		}()
	}
	wg.Wait()
	if advanced != 1 || len(tasks) != 1 {
		t.Fatalf("%d callers advanced the tick, %d tasks, want 1 and 1", advanced, len(tasks))
	}
	if n := len(e.all()); n != 1 {
		t.Fatalf("%d tasks in the table, want 1", n)
	}
	task := e.get(tasks[0])
	if task.Type != "dt.task" || task.IdemKey == "" {
		t.Fatalf("tick task = %+v", task)
	}
	if got := e.getSchedule("s").LastTick; !got.Equal(tick) {
		t.Fatalf("last tick %v, want %v", got, tick)
	}

	// A stale leader (prev is the old tick) writes nothing, even for a
	// later tick.
	if res, ok, err := e.drv.EnqueueTick(e.ctx, driver.TickParams{Name: "s", Prev: start, Tick: tick.Add(time.Minute),
		Task: e.tickTask("s", tick.Add(time.Minute)), Now: e.clock.Now()}); err != nil || ok || res != nil {
		t.Fatalf("stale tick: %v %v %v, want nothing", res, ok, err)
	}
	// Passing ticks over advances without a task.
	skipTo := tick.Add(5 * time.Minute)
	if res, ok, err := e.drv.EnqueueTick(e.ctx, driver.TickParams{Name: "s", Prev: tick, Tick: skipTo, Now: e.clock.Now()}); err != nil || !ok || res != nil {
		t.Fatalf("skip: %v %v %v, want advanced without a task", res, ok, err)
	}
	if n := len(e.all()); n != 1 || !e.getSchedule("s").LastTick.Equal(skipTo) {
		t.Fatalf("after the skip: %d tasks, last tick %v", n, e.getSchedule("s").LastTick)
	}
	// An unknown schedule advances nothing.
	if res, ok, err := e.drv.EnqueueTick(e.ctx, driver.TickParams{Name: "nope", Prev: start, Tick: tick, Task: e.tickTask("nope", tick), Now: e.clock.Now()}); err != nil || ok || res != nil {
		t.Fatalf("unknown schedule: %v %v %v", res, ok, err)
	}
	if n := len(e.all()); n != 1 {
		t.Fatalf("%d tasks, want 1", n)
	}
}

// testSchedulePause: a paused schedule enqueues nothing; a resume moves
// its last tick to the resume's second so the paused period never runs.
func testSchedulePause(t *testing.T, e *env) {
	e.upsertSchedules(e.schedule("s"))
	s, err := e.drv.PauseSchedule(e.ctx, driver.PauseScheduleParams{Name: "s", Paused: true, Now: e.clock.Now()})
	if err != nil || !s.Paused {
		t.Fatalf("pause: %+v %v", s, err)
	}
	tick := start.Add(time.Minute)
	if res, ok, err := e.drv.EnqueueTick(e.ctx, driver.TickParams{Name: "s", Prev: start, Tick: tick, Task: e.tickTask("s", tick), Now: tick}); err != nil || ok || res != nil {
		t.Fatalf("tick while paused: %v %v %v, want nothing", res, ok, err)
	}
	if n := len(e.all()); n != 0 {
		t.Fatalf("paused schedule enqueued %d tasks", n)
	}
	resumeAt := e.clock.Advance(10*time.Minute + 300*time.Millisecond)
	s, err = e.drv.PauseSchedule(e.ctx, driver.PauseScheduleParams{Name: "s", Now: resumeAt})
	if err != nil || s.Paused || !s.LastTick.Equal(resumeAt.Truncate(time.Second)) {
		t.Fatalf("resume: %+v %v, want last tick %v", s, err, resumeAt.Truncate(time.Second))
	}
	// Resuming a running schedule leaves its last tick alone.
	s, err = e.drv.PauseSchedule(e.ctx, driver.PauseScheduleParams{Name: "s", Now: resumeAt.Add(time.Hour)})
	if err != nil || s.Paused || !s.LastTick.Equal(resumeAt.Truncate(time.Second)) {
		t.Fatalf("second resume: %+v %v", s, err)
	}
	prev := s.LastTick
	if _, ok, err := e.drv.EnqueueTick(e.ctx, driver.TickParams{Name: "s", Prev: prev, Tick: prev.Add(time.Minute), Task: e.tickTask("s", prev.Add(time.Minute)), Now: resumeAt}); err != nil || !ok {
		t.Fatalf("tick after resume: %v %v", ok, err)
	}
	if _, err := e.drv.PauseSchedule(e.ctx, driver.PauseScheduleParams{Name: "nope", Paused: true, Now: resumeAt}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("pause unknown: %v, want ErrNotFound", err)
	}
}

func testScheduleBadInput(t *testing.T, e *env) {
	long := strings.Repeat("x", driver.MaxSchedulePayload+1)
	for name, mod := range map[string]func(p *driver.ScheduleParams){
		"empty name":      func(p *driver.ScheduleParams) { p.Name = "" },
		"name with space": func(p *driver.ScheduleParams) { p.Name = "a b" },
		"long name":       func(p *driver.ScheduleParams) { p.Name = long[:driver.MaxScheduleName+1] },
		"empty spec":      func(p *driver.ScheduleParams) { p.Spec = "" },
		"long spec":       func(p *driver.ScheduleParams) { p.Spec = long[:driver.MaxScheduleSpec+1] },
		"empty zone":      func(p *driver.ScheduleParams) { p.TimeZone = "" },
		"empty type":      func(p *driver.ScheduleParams) { p.Type = "" },
		"empty queue":     func(p *driver.ScheduleParams) { p.Queue = "" },
		"payload no JSON": func(p *driver.ScheduleParams) { p.Payload = json.RawMessage(`{"a":`) },
		"payload empty":   func(p *driver.ScheduleParams) { p.Payload = nil },
		"payload long":    func(p *driver.ScheduleParams) { p.Payload = json.RawMessage(`"` + long + `"`) },
		"payload NUL":     func(p *driver.ScheduleParams) { p.Payload = json.RawMessage("\"a\x00\"") },
		"missed policy":   func(p *driver.ScheduleParams) { p.Missed = "twice" },
		"no time":         func(p *driver.ScheduleParams) { p.Now = time.Time{} },
		"spec not UTF-8":  func(p *driver.ScheduleParams) { p.Spec = "@every \xff" },
	} {
		// A good schedule beside the bad one is not written either.
		if err := e.drv.UpsertSchedules(e.ctx, []driver.ScheduleParams{e.schedule("good"), e.schedule("bad", mod)}); err == nil {
			t.Errorf("upsert with %s: no error", name)
		}
	}
	if err := e.drv.UpsertSchedules(e.ctx, []driver.ScheduleParams{e.schedule("twice"), e.schedule("twice")}); err == nil {
		t.Error("upsert of one name twice: no error")
	}
	if got := e.listSchedules(); len(got) != 0 {
		t.Fatalf("refused upserts wrote %+v", got)
	}
	e.upsertSchedules(e.schedule("s"))
	for name, p := range map[string]driver.TickParams{
		"tick not after prev": {Name: "s", Prev: start, Tick: start, Now: start},
		"tick before prev":    {Name: "s", Prev: start, Tick: start.Add(-time.Minute), Now: start},
		"fractional tick":     {Name: "s", Prev: start, Tick: start.Add(1500 * time.Millisecond), Now: start},
		"no prev":             {Name: "s", Tick: start.Add(time.Minute), Now: start},
		"bad name":            {Name: "", Prev: start, Tick: start.Add(time.Minute), Now: start},
	} {
		if _, _, err := e.drv.EnqueueTick(e.ctx, p); err == nil {
			t.Errorf("tick with %s: no error", name)
		}
	}
	// A task the insert refuses rolls the tick back.
	tick := start.Add(time.Minute)
	held := e.insert(func(p *driver.InsertParams) { p.IdemKey = "k1" })
	bad := e.tickTask("s", tick)
	bad.IdemKey, bad.PayloadDigest = "k1", "another digest"
	if _, _, err := e.drv.EnqueueTick(e.ctx, driver.TickParams{Name: "s", Prev: start, Tick: tick, Task: bad, Now: start}); !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("tick with a conflicting key: %v, want ErrIdempotencyConflict", err)
	}
	if got := e.getSchedule("s").LastTick; !got.Equal(start) {
		t.Fatalf("a refused tick moved the last tick to %v", got)
	}
	if all := e.all(); len(all) != 1 || all[0].ID != held.ID {
		t.Fatalf("a refused tick wrote tasks: %v", ids(all))
	}
}
