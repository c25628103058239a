package archiver_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/archiver"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  archiver.Store = driver.Driver(nil) // the real drivers fit
	t0                = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const (
	interval = time.Minute
	batch    = 4
)

type purgeCall struct {
	before time.Time
	limit  int
}

// store is a fake driver: each Archive call is sent on archives and
// answered by archive (default: nothing to move), each PurgeArchive call
// sent on purges and answered by purge (default: nothing to delete).
// Only the archiver's goroutine touches the call counts.
type store struct {
	archives chan driver.ArchiveParams
	purges   chan purgeCall
	archive  func(call int) (driver.ArchiveResult, error)
	purge    func(call int) (int64, error)
	na, np   int
}

func (s *store) Archive(_ context.Context, p driver.ArchiveParams) (driver.ArchiveResult, error) {
	s.na++
	s.archives <- p
	if s.archive == nil {
		return driver.ArchiveResult{}, nil
	}
	return s.archive(s.na)
}

func (s *store) PurgeArchive(_ context.Context, before time.Time, limit int) (int64, error) {
	s.np++
	s.purges <- purgeCall{before, limit}
	if s.purge == nil {
		return 0, nil
	}
	return s.purge(s.np)
}

// logs records the messages logged, by level.
type logs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logs) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs)
}

type bundle struct {
	clk     *servicetest.Clock
	drv     *store
	log     *logs
	leading atomic.Bool
	cfg     archiver.Config
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{
		clk: servicetest.NewClock(t0),
		drv: &store{archives: make(chan driver.ArchiveParams, 100), purges: make(chan purgeCall, 100)},
		log: &logs{},
	}
	b.leading.Store(true)
	b.cfg = archiver.Config{
		Driver: b.drv, Node: "node-1", Interval: interval, Batch: batch,
		RetainSucceeded: time.Hour, RetainDead: 7 * 24 * time.Hour,
		Clock: b.clk, Logger: slog.New(b.log), Leading: b.leading.Load,
	}
	return b
}

// runOnce runs one pass in a goroutine; the channel closes when it ends.
func (b *bundle) runOnce(a *archiver.Archiver) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunOnce(context.Background())
	}()
	return done
}

// pause waits for the archiver to pause between two batches and ends the
// pause.
func (b *bundle) pause(t *testing.T) {
	t.Helper()
	if d := b.clk.AdvanceToNext(t); d != archiver.Pause {
		t.Fatalf("paused %v between batches, want %v", d, archiver.Pause)
	}
}

// wait waits for a pass run by runOnce to end.
func wait(t *testing.T, done chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pass did not end after 10s")
	}
}

// Succeeded and cancelled tasks are archived after RetainSucceeded, dead
// ones after RetainDead, judged at the pass's start; batches go on, a
// pause apart, until one moves fewer than Batch.
func TestBatchesUntilShortOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.drv.archive = func(call int) (driver.ArchiveResult, error) {
		switch call {
		case 1:
			return driver.ArchiveResult{Succeeded: 3, Cancelled: 1}, nil
		case 2:
			return driver.ArchiveResult{Dead: 4}, nil
		}
		return driver.ArchiveResult{Succeeded: 1}, nil
	}
	a := archiver.New(b.cfg)
	done := b.runOnce(a)
	want := driver.ArchiveParams{SucceededBefore: t0.Add(-time.Hour), DeadBefore: t0.Add(-7 * 24 * time.Hour), Limit: batch, Now: t0}
	for i := 1; i <= 3; i++ {
		if p := servicetest.Recv(t, b.drv.archives); p != want {
			t.Fatalf("batch %d: params %+v, want %+v", i, p, want)
		}
		if i < 3 {
			b.pause(t)
		}
	}
	wait(t, done)
	servicetest.None(t, b.drv.archives)
	servicetest.None(t, b.drv.purges) // DeleteArchivedAfter is 0: kept for ever
	if got, want := a.Totals(), (archiver.Totals{Succeeded: 4, Cancelled: 1, Dead: 4, Batches: 3}); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	if got := b.log.all(); !slices.Equal(got, []string{"INFO keel: archived finished tasks"}) {
		t.Fatalf("logged %q, want one INFO line", got)
	}
	if b.clk.Waiters() != 0 {
		t.Fatal("a pause is still waiting")
	}
}

// A pass that moves nothing makes one call and logs nothing.
func TestNothingToArchive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := archiver.New(b.cfg)
	a.RunOnce(context.Background())
	servicetest.Recv(t, b.drv.archives)
	servicetest.None(t, b.drv.archives)
	if got, want := a.Totals(), (archiver.Totals{Batches: 1}); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	if got := b.log.all(); len(got) != 0 {
		t.Fatalf("logged %q", got)
	}
}

// With DeleteArchivedAfter set, the pass then deletes rows archived
// before that long ago, in batches, until one deletes fewer than Batch.
func TestDeletesAfterDeleteArchivedAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.DeleteArchivedAfter = 30 * 24 * time.Hour
	b.drv.purge = func(call int) (int64, error) {
		if call < 3 {
			return batch, nil
		}
		return 2, nil
	}
	a := archiver.New(b.cfg)
	done := b.runOnce(a)
	servicetest.Recv(t, b.drv.archives)
	for i := 1; i <= 3; i++ {
		if c := servicetest.Recv(t, b.drv.purges); !c.before.Equal(t0.Add(-30*24*time.Hour)) || c.limit != batch {
			t.Fatalf("purge %d: %+v", i, c)
		}
		if i < 3 {
			b.pause(t)
		}
	}
	wait(t, done)
	servicetest.None(t, b.drv.purges)
	if got, want := a.Totals(), (archiver.Totals{Deleted: 10, Batches: 1}); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	if got := b.log.all(); !slices.Equal(got, []string{"INFO keel: deleted archived tasks"}) {
		t.Fatalf("logged %q", got)
	}
}

// A failed Archive is logged and ends the archiving, not the deleting; a
// failed PurgeArchive is logged too. The next pass tries again.
func TestErrorsEndTheirPart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.DeleteArchivedAfter = time.Hour
	b.drv.archive = func(call int) (driver.ArchiveResult, error) {
		if call == 1 {
			return driver.ArchiveResult{}, errors.New("connection refused")
		}
		return driver.ArchiveResult{Dead: 1}, nil
	}
	b.drv.purge = func(call int) (int64, error) {
		if call == 1 {
			return 0, errors.New("connection refused")
		}
		return 1, nil
	}
	a := archiver.New(b.cfg)
	a.RunOnce(context.Background()) // no pause: nothing waits on the clock
	servicetest.Recv(t, b.drv.archives)
	servicetest.Recv(t, b.drv.purges)
	servicetest.None(t, b.drv.archives)
	servicetest.None(t, b.drv.purges)
	if got := a.Totals(); got != (archiver.Totals{}) {
		t.Fatalf("totals after failures %+v", got)
	}
	want := []string{"WARN keel: archiving finished tasks failed; next try in one interval",
		"WARN keel: deleting archived tasks failed; next try in one interval"}
	if got := b.log.all(); !slices.Equal(got, want) {
		t.Fatalf("logged %q, want %q", got, want)
	}
	a.RunOnce(context.Background())
	servicetest.Recv(t, b.drv.archives)
	servicetest.Recv(t, b.drv.purges)
	if got, want := a.Totals(), (archiver.Totals{Dead: 1, Deleted: 1, Batches: 1}); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
}

// Only the leader archives, and a pass ends when leadership is lost.
func TestLeaderOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.DeleteArchivedAfter = time.Hour
	b.leading.Store(false)
	a := archiver.New(b.cfg)
	a.RunOnce(context.Background())
	servicetest.None(t, b.drv.archives)

	b.leading.Store(true)
	b.drv.archive = func(int) (driver.ArchiveResult, error) { return driver.ArchiveResult{Succeeded: batch}, nil }
	done := b.runOnce(a)
	servicetest.Recv(t, b.drv.archives)
	b.leading.Store(false)
	b.pause(t)
	wait(t, done)
	servicetest.None(t, b.drv.archives)
	servicetest.None(t, b.drv.purges)
}

// Start runs a pass at once and then every Interval, each judged at its
// own start.
func TestStartRunsEveryInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := archiver.New(b.cfg)
	a.Start(context.Background())
	defer a.Stop()
	if p := servicetest.Recv(t, b.drv.archives); !p.Now.Equal(t0) {
		t.Fatalf("first pass at %v, want at once", p.Now)
	}
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(interval)
	if p := servicetest.Recv(t, b.drv.archives); !p.Now.Equal(t0.Add(interval)) ||
		!p.SucceededBefore.Equal(t0.Add(interval-time.Hour)) {
		t.Fatalf("second pass %+v, want one interval on", p)
	}
}

// Stop ends a pass that is pausing between batches.
func TestStopDuringPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.drv.archive = func(int) (driver.ArchiveResult, error) { return driver.ArchiveResult{Succeeded: batch}, nil }
	a := archiver.New(b.cfg)
	a.Start(context.Background())
	servicetest.Recv(t, b.drv.archives)
	b.clk.WaitForWaiters(t, 2) // the ticker and the pause
	a.Stop()
	servicetest.None(t, b.drv.archives)
}
