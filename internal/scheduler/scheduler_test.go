package scheduler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/scheduler"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  scheduler.Store = driver.Driver(nil) // the real drivers fit
	t0                 = time.Date(2031, 3, 3, 12, 0, 0, 0, time.UTC)
)

// store is a fake driver holding schedule rows. EnqueueTick is sent on
// ticks and, unless taken is set, advances the row as a driver does.
type store struct {
	mu      sync.Mutex
	rows    []driver.ScheduleRow
	listErr error
	taken   bool // another leader took every tick: nothing advances
	lists   chan struct{}
	ticks   chan driver.TickParams
	upserts chan []driver.ScheduleParams
	nextID  int64
	// apiErr fails the API's calls (api_test.go); inserted holds the
	// tasks they inserted.
	apiErr   error
	inserted []driver.InsertParams
}

func (s *store) UpsertSchedules(_ context.Context, ps []driver.ScheduleParams) error {
	s.upserts <- ps
	return nil
}

func (s *store) ListSchedules(context.Context) ([]driver.ScheduleRow, error) {
	s.lists <- struct{}{}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listErr != nil {
		return nil, s.listErr
	}
	return append([]driver.ScheduleRow(nil), s.rows...), nil
}

func (s *store) EnqueueTick(_ context.Context, p driver.TickParams) (*driver.InsertResult, bool, error) {
	s.ticks <- p
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken {
		return nil, false, nil
	}
	for i := range s.rows {
		if s.rows[i].Name == p.Name && s.rows[i].LastTick.Equal(p.Prev) {
			s.rows[i].LastTick = p.Tick
		}
	}
	if p.Task == nil {
		return nil, true, nil
	}
	s.nextID++
	return &driver.InsertResult{Task: &driver.TaskRow{ID: s.nextID, Type: p.Task.Type, Queue: p.Task.Queue, State: driver.StatePending}}, true, nil
}

// syncBuffer is a log sink the service's goroutine writes while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count returns how many log lines hold msg.
func (b *syncBuffer) count(msg string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), msg)
}

type bundle struct {
	clk      *servicetest.Clock
	drv      *store
	logs     *syncBuffer
	leading  atomic.Bool
	checks   chan bool // every Leading() answer
	enqueued chan string
	taskErr  error // Task fails with it
	cfg      scheduler.Config
}

func setup(t *testing.T, rows ...driver.ScheduleRow) *bundle {
	t.Helper()
	return setupAt(t, t0, rows...)
}

// setupAt is setup with the clock at start.
func setupAt(t *testing.T, start time.Time, rows ...driver.ScheduleRow) *bundle {
	t.Helper()
	b := &bundle{
		clk: servicetest.NewClock(start),
		drv: &store{rows: rows, lists: make(chan struct{}, 100), ticks: make(chan driver.TickParams, 100),
			upserts: make(chan []driver.ScheduleParams, 10)},
		logs:     &syncBuffer{},
		checks:   make(chan bool, 100),
		enqueued: make(chan string, 100),
	}
	b.cfg = scheduler.Config{
		Driver: b.drv, Clock: b.clk, Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Leading: func() bool {
			v := b.leading.Load()
			b.checks <- v
			return v
		},
		Task: func(_ context.Context, s *driver.ScheduleRow, key string, meta map[string]string, now time.Time) (*driver.InsertParams, error) {
			if b.taskErr != nil {
				return nil, b.taskErr
			}
			m, _ := json.Marshal(meta)
			return &driver.InsertParams{Type: s.Type, Queue: s.Queue, Payload: s.Payload, IdemKey: key, Meta: m, RunAt: now, Now: now}, nil
		},
		Enqueued: func(name string, res *driver.InsertResult) { b.enqueued <- name },
	}
	return b
}

// every returns a row of an "@every 1m" schedule last ticked at t0.
func every(name string, mod ...func(*driver.ScheduleRow)) driver.ScheduleRow {
	r := driver.ScheduleRow{Name: name, Spec: "@every 1m", TimeZone: "UTC", Type: "report", Queue: "default",
		Payload: json.RawMessage(`{}`), Missed: driver.MissedRunOnce, LastTick: t0}
	for _, m := range mod {
		m(&r)
	}
	return r
}

func skip(r *driver.ScheduleRow) { r.Missed = driver.MissedSkip }

// runOnce moves the clock to t0+d and runs one pass.
func (b *bundle) runOnce(t *testing.T, d time.Duration) error {
	t.Helper()
	b.clk.Advance(t0.Add(d).Sub(b.clk.Now()))
	return scheduler.New(b.cfg).RunOnce(context.Background())
}

func TestNothingDueNothingWritten(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m"))
	if err := b.runOnce(t, 59*time.Second); err != nil {
		t.Fatal(err)
	}
	servicetest.None(t, b.drv.ticks)
}

func TestTickOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m"))
	if err := b.runOnce(t, time.Minute+time.Second); err != nil {
		t.Fatal(err)
	}
	p := servicetest.Recv(t, b.drv.ticks)
	tick := t0.Add(time.Minute)
	if p.Name != "m" || !p.Prev.Equal(t0) || !p.Tick.Equal(tick) || !p.Now.Equal(tick.Add(time.Second)) || p.Task == nil {
		t.Fatalf("tick %+v", p)
	}
	if want := scheduler.TickKey("m", tick); p.Task.IdemKey != want || want != "keel.schedule:m:1930305660" {
		t.Fatalf("key %q, want %q", p.Task.IdemKey, want)
	}
	var meta map[string]string
	if err := json.Unmarshal(p.Task.Meta, &meta); err != nil || meta[scheduler.MetaSchedule] != "m" || meta[scheduler.MetaTick] != "2031-03-03T12:01:00Z" {
		t.Fatalf("meta %s (%v)", p.Task.Meta, err)
	}
	if name := servicetest.Recv(t, b.enqueued); name != "m" {
		t.Fatalf("Enqueued told of %q", name)
	}
	if n := b.logs.count("missed"); n != 0 {
		t.Fatalf("an on-time tick logged as missed")
	}
	servicetest.None(t, b.drv.ticks)
}

// Run once: after missed ticks one task runs, for the latest; the ones
// before it are passed over.
func TestRunOnceAfterMissedTicks(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m"))
	if err := b.runOnce(t, 5*time.Minute+30*time.Second); err != nil {
		t.Fatal(err)
	}
	p := servicetest.Recv(t, b.drv.ticks)
	if !p.Prev.Equal(t0) || !p.Tick.Equal(t0.Add(5*time.Minute)) || p.Task == nil || p.Task.IdemKey != scheduler.TickKey("m", p.Tick) {
		t.Fatalf("tick %+v, want the latest with a task", p)
	}
	servicetest.Recv(t, b.enqueued)
	servicetest.None(t, b.drv.ticks)
	if n := b.logs.count("schedule ticks missed; one task runs for the latest"); n != 1 {
		t.Fatalf("%d missed warnings, want 1", n)
	}
	// The next pass finds nothing due until the next tick.
	if err := b.runOnce(t, 5*time.Minute+59*time.Second); err != nil {
		t.Fatal(err)
	}
	servicetest.None(t, b.drv.ticks)
}

// Skip: missed ticks advance the schedule without a task; the latest due
// tick runs only when found within SkipGrace of its time.
func TestSkipPolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		at       time.Duration
		tick     time.Duration
		withTask bool
	}{
		{"on time", time.Minute, time.Minute, true},
		{"late within the grace", time.Minute + scheduler.SkipGrace, time.Minute, true},
		{"late past the grace", time.Minute + scheduler.SkipGrace + time.Second, time.Minute, false},
		{"many missed, the latest on time", 5*time.Minute + time.Second, 5 * time.Minute, true},
		{"many missed, the latest late", 5*time.Minute + 30*time.Second, 5 * time.Minute, false},
	}
	for _, c := range cases {
		b := setup(t, every("s", skip))
		if err := b.runOnce(t, c.at); err != nil {
			t.Fatal(err)
		}
		p := servicetest.Recv(t, b.drv.ticks)
		if !p.Tick.Equal(t0.Add(c.tick)) || (p.Task != nil) != c.withTask {
			t.Errorf("%s: tick %v with task %v; want %v, %v", c.name, p.Tick, p.Task != nil, t0.Add(c.tick), c.withTask)
		}
		if c.withTask {
			servicetest.Recv(t, b.enqueued)
		} else {
			servicetest.None(t, b.enqueued)
			if n := b.logs.count("schedule ticks missed and skipped"); n != 1 {
				t.Errorf("%s: %d skip warnings, want 1", c.name, n)
			}
		}
	}
}

func TestPausedScheduleSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, every("p", func(r *driver.ScheduleRow) { r.Paused = true }), every("w"))
	if err := b.runOnce(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if p := servicetest.Recv(t, b.drv.ticks); p.Name != "w" {
		t.Fatalf("tick of %q", p.Name)
	}
	servicetest.None(t, b.drv.ticks)
}

// A tick another leader took (or a schedule paused meanwhile) writes and
// tells nothing.
func TestTickTakenElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m"))
	b.drv.taken = true
	if err := b.runOnce(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	servicetest.Recv(t, b.drv.ticks)
	servicetest.None(t, b.enqueued)
}

// A schedule this process cannot read is logged once and passed over;
// the others run.
func TestUnreadableScheduleLoggedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, every("mars", func(r *driver.ScheduleRow) { r.TimeZone = "Mars/Olympus" }), every("w"))
	s := scheduler.New(b.cfg)
	b.clk.Advance(time.Minute)
	for range 2 {
		if err := s.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if p := servicetest.Recv(t, b.drv.ticks); p.Name != "w" {
		t.Fatalf("tick of %q", p.Name)
	}
	servicetest.None(t, b.drv.ticks)
	if n := b.logs.count("cannot read a schedule"); n != 1 {
		t.Fatalf("%d errors logged, want 1", n)
	}
}

// A schedule whose task cannot be built fails the pass; the others run.
func TestTaskErrorFailsPass(t *testing.T) {
	t.Parallel()
	b := setup(t, every("a"), every("b"))
	b.taskErr = errors.New("unknown type")
	err := b.runOnce(t, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "2 schedules: unknown type") {
		t.Fatalf("pass returned %v", err)
	}
	servicetest.None(t, b.drv.ticks)
}

func TestStoreConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := scheduler.New(b.cfg).StoreConfigured(context.Background()); err != nil {
		t.Fatal(err)
	}
	servicetest.None(t, b.drv.upserts) // none configured: nothing written
	b.cfg.Schedules = []driver.ScheduleParams{{Name: "a"}, {Name: "b"}}
	b.clk.Advance(time.Hour)
	if err := scheduler.New(b.cfg).StoreConfigured(context.Background()); err != nil {
		t.Fatal(err)
	}
	ps := servicetest.Recv(t, b.drv.upserts)
	if len(ps) != 2 || !ps[0].Now.Equal(t0.Add(time.Hour)) || !ps[1].Now.Equal(t0.Add(time.Hour)) {
		t.Fatalf("upserted %+v, want both at the clock's time", ps)
	}
	if !b.cfg.Schedules[0].Now.IsZero() {
		t.Fatal("the configured schedules were changed")
	}
}

// Only the leader enqueues; the loop looks every Interval.
func TestLoopLeaderOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m"))
	s := scheduler.New(b.cfg)
	s.Start(context.Background())
	t.Cleanup(s.Stop)
	if servicetest.Recv(t, b.checks) {
		t.Fatal("leading")
	}
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(time.Minute)
	servicetest.Recv(t, b.checks) // a second pass, still not leading
	servicetest.None(t, b.drv.lists)
	b.leading.Store(true)
	// The clock stands on a whole second: the next pass is Offset away.
	if d := b.clk.AdvanceToNext(t); d != scheduler.Offset {
		t.Fatalf("the next pass came %v later, want %v", d, scheduler.Offset)
	}
	servicetest.Recv(t, b.checks)
	servicetest.Recv(t, b.drv.lists)
	if p := servicetest.Recv(t, b.drv.ticks); !p.Tick.Equal(t0.Add(time.Minute)) {
		t.Fatalf("tick %v", p.Tick)
	}
}

// A lasting failure is retried every pass and logged once a minute.
func TestLoopLogsLastingFailureOncePerMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.drv.listErr = errors.New("connection refused")
	b.leading.Store(true)
	s := scheduler.New(b.cfg)
	s.Start(context.Background())
	t.Cleanup(s.Stop)
	for i := range 61 {
		servicetest.Recv(t, b.checks)
		servicetest.Recv(t, b.drv.lists)
		if i == 0 {
			b.clk.WaitForWaiters(t, 1)
		}
		b.clk.AdvanceToNext(t)
	}
	servicetest.Recv(t, b.checks)
	servicetest.Recv(t, b.drv.lists)
	s.Stop()
	if n := b.logs.count("enqueuing due schedule ticks failed"); n != 2 {
		t.Fatalf("%d warnings in 62 failed passes, want 2 (the first and the 61st)", n)
	}
	if n := b.logs.count("failures_in_a_row=61"); n != 1 {
		t.Fatalf("the second warning does not count 61 failures in a row")
	}
}

// Describe: the last tick and next run in the schedule's zone; due when
// a tick came due; no next run while paused; an unreadable zone says why.
func TestDescribe(t *testing.T) {
	t.Parallel()
	berlin := driver.ScheduleRow{Name: "b", Spec: "0 9 * * *", TimeZone: "Europe/Berlin", LastTick: t0}
	got := scheduler.Describe(&berlin, t0)
	if got.Error != "" || got.Due || got.LastTick.Location().String() != "Europe/Berlin" || !got.LastTick.Equal(t0) ||
		!got.NextRun.Equal(time.Date(2031, 3, 4, 8, 0, 0, 0, time.UTC)) || got.NextRun.Location().String() != "Europe/Berlin" {
		t.Fatalf("berlin: %+v", got)
	}
	m := every("m")
	if got := scheduler.Describe(&m, t0.Add(150*time.Second)); !got.Due || !got.NextRun.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("due: %+v, want due with the next run at +3m", got)
	}
	m.Paused = true
	if got := scheduler.Describe(&m, t0.Add(150*time.Second)); got.Due || !got.NextRun.IsZero() {
		t.Fatalf("paused: %+v, want neither due nor a next run", got)
	}
	mars := every("mars", func(r *driver.ScheduleRow) { r.TimeZone = "Mars/Olympus" })
	if got := scheduler.Describe(&mars, t0); !strings.Contains(got.Error, `unknown time zone "Mars/Olympus"`) || !got.LastTick.Equal(t0) {
		t.Fatalf("mars: %+v", got)
	}
}

// Passes fall Offset after each whole second, wherever the loop started
// and however long a pass took, so a tick due on a second is found on
// the pass right after it, never one later with the tick after it.
func TestLoopPassesAfterWholeSeconds(t *testing.T) {
	t.Parallel()
	start := t0.Add(1999 * time.Millisecond) // a moment before a tick
	b := setupAt(t, start, every("s", func(r *driver.ScheduleRow) { r.Spec = "@every 1s" }))
	b.leading.Store(true)
	s := scheduler.New(b.cfg)
	s.Start(context.Background())
	t.Cleanup(s.Stop)
	servicetest.Recv(t, b.checks)
	servicetest.Recv(t, b.drv.lists)
	if p := servicetest.Recv(t, b.drv.ticks); !p.Tick.Equal(t0.Add(time.Second)) {
		t.Fatalf("first pass at %v enqueued tick %v, want %v", start, p.Tick, t0.Add(time.Second))
	}
	want := t0.Add(2*time.Second + scheduler.Offset)
	for i := range 3 {
		b.clk.AdvanceToNext(t)
		if now := b.clk.Now(); !now.Equal(want) {
			t.Fatalf("pass %d at %v, want %v", i+2, now, want)
		}
		servicetest.Recv(t, b.checks)
		servicetest.Recv(t, b.drv.lists)
		p := servicetest.Recv(t, b.drv.ticks)
		if tick := want.Truncate(time.Second); !p.Tick.Equal(tick) {
			t.Fatalf("pass %d enqueued tick %v, want %v: one tick each pass, none passed over", i+2, p.Tick, tick)
		}
		want = want.Add(time.Second)
	}
	if n := b.logs.count("missed"); n != 0 {
		t.Fatalf("%d missed-tick warnings on a loop that kept up", n)
	}
}
