package backlog_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backlog"
	"github.com/keelq/keel/internal/service/servicetest"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)

// store is a fake driver: Counts answers counts (or err), RecordBacklog
// keeps every sample (or fails with recordErr).
type store struct {
	counts    []driver.CountRow
	err       error
	recordErr error
	reads     int
	samples   []driver.BacklogSample
}

func (s *store) Counts(context.Context) ([]driver.CountRow, error) {
	s.reads++
	return s.counts, s.err
}

func (s *store) RecordBacklog(_ context.Context, sample driver.BacklogSample) error {
	if err := sample.Validate(); err != nil {
		return err
	}
	if s.recordErr != nil {
		return s.recordErr
	}
	s.samples = append(s.samples, sample)
	return nil
}

// last returns the last sample stored.
func (s *store) last(t *testing.T) driver.BacklogSample {
	t.Helper()
	if len(s.samples) == 0 {
		t.Fatal("no sample stored")
	}
	return s.samples[len(s.samples)-1]
}

type bundle struct {
	clk     *servicetest.Clock
	drv     *store
	leading bool
	logs    bytes.Buffer
	s       *backlog.Sampler
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{clk: servicetest.NewClock(t0), drv: &store{}, leading: true}
	b.s = backlog.New(backlog.Config{
		Driver: b.drv, Retention: time.Hour, Clock: b.clk,
		Logger:  slog.New(slog.NewTextHandler(&b.logs, nil)),
		Leading: func() bool { return b.leading },
	})
	return b
}

func minute(at time.Time) int64 { return at.Unix() / 60 }

// TestSamplesPending: a sample counts the pending tasks of every queue,
// ready, scheduled and retrying, and nothing else.
func TestSamplesPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := minute(t0)
	b.drv.counts = []driver.CountRow{
		{Queue: "default", Type: "a", Kind: string(driver.StatePending), Due: m - 3, N: 5},  // ready
		{Queue: "default", Type: "a", Kind: string(driver.StatePending), Due: m + 30, N: 7}, // scheduled
		{Queue: "mail", Type: "b", Kind: driver.KindRetrying, Due: m + 1, N: 11},
		{Queue: "mail", Type: "b", Kind: driver.KindRetrying, Due: m, N: 13}, // retrying, ready again
		{Queue: "mail", Type: "b", Kind: string(driver.StateRunning), N: 100},
		{Queue: "mail", Type: "b", Kind: string(driver.StateDead), N: 1000},
		{Queue: "keel", Type: "keel.drill", Kind: string(driver.StatePending), Due: m, N: 2},
	}
	b.s.RunOnce(context.Background())
	want := driver.BacklogSample{Minute: m, Pending: 5 + 7 + 11 + 13 + 2, DropBefore: m - 60}
	if got := b.drv.last(t); got != want {
		t.Fatalf("sample %+v, want %+v", got, want)
	}
}

// TestDropsOldPeaksOnceAMinute: the first sample of each minute drops the
// peaks older than the retention; the others of the minute do not. A
// minute whose first sample failed drops with the next one that is stored.
func TestDropsOldPeaksOnceAMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m := minute(t0)
	b.s.RunOnce(ctx)
	for range 9 { // to 12:00:55
		b.clk.Advance(backlog.Interval)
		b.s.RunOnce(ctx)
	}
	b.drv.recordErr = errors.New("disk full")
	b.clk.Advance(backlog.Interval) // 12:01:00
	b.s.RunOnce(ctx)
	b.drv.recordErr = nil
	b.clk.Advance(backlog.Interval)
	b.s.RunOnce(ctx)
	b.clk.Advance(backlog.Interval)
	b.s.RunOnce(ctx)
	var drops []int64
	for _, s := range b.drv.samples {
		drops = append(drops, s.DropBefore)
	}
	want := []int64{m - 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, m + 1 - 60, 0}
	if len(drops) != len(want) {
		t.Fatalf("drops %v, want %v", drops, want)
	}
	for i := range want {
		if drops[i] != want[i] {
			t.Fatalf("drops %v, want %v", drops, want)
		}
	}
	if s := b.drv.last(t); s.Minute != m+1 {
		t.Fatalf("last sample in minute %d, want %d", s.Minute, m+1)
	}
}

// TestOnlyTheLeaderSamples: a process that does not lead reads nothing.
func TestOnlyTheLeaderSamples(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading = false
	b.s.RunOnce(context.Background())
	if b.drv.reads != 0 || len(b.drv.samples) != 0 {
		t.Fatalf("%d reads, %d samples while not leading", b.drv.reads, len(b.drv.samples))
	}
	b.leading = true
	b.s.RunOnce(context.Background())
	if b.drv.reads != 1 || len(b.drv.samples) != 1 {
		t.Fatalf("%d reads, %d samples once leading, want 1 and 1", b.drv.reads, len(b.drv.samples))
	}
}

// TestWarnsOnceAMinuteWhileFailing: failed samples (every Interval) warn
// at the first failure and then once a minute while they go on; a success
// ends the run, and a failure during shutdown is not reported.
func TestWarnsOnceAMinuteWhileFailing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	warnings := func() int { return strings.Count(b.logs.String(), "sampling the backlog failed") }
	b.drv.err = errors.New("connection refused")
	for range 13 { // a minute and one Interval: warnings at the 1st and the 13th
		b.s.RunOnce(ctx)
		b.clk.Advance(backlog.Interval)
	}
	if n := warnings(); n != 2 {
		t.Fatalf("%d warnings in 13 failures a minute apart, want 2:\n%s", n, b.logs.String())
	}
	if !strings.Contains(b.logs.String(), "failures_in_a_row=13") {
		t.Errorf("the second warning does not count 13 failures:\n%s", b.logs.String())
	}
	b.drv.err = nil
	b.s.RunOnce(ctx)
	b.drv.err = errors.New("connection refused")
	b.s.RunOnce(ctx)
	if n := warnings(); n != 3 {
		t.Fatalf("%d warnings, want a third for the first failure after a success", n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for range 12 {
		b.s.RunOnce(cancelled)
	}
	if n := warnings(); n != 3 {
		t.Fatalf("%d warnings after failures during shutdown, want still 3", n)
	}
}
