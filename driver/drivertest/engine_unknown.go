package drivertest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// lostAnswers is a driver on the real database whose next claims or
// finishes are written and committed, after which the answer is lost: the
// call returns a connection error, as when a database restart breaks the
// connection at or after COMMIT ("invalid connection" on MariaDB).
type lostAnswers struct {
	driver.Driver
	claims   atomic.Int32 // claims (that took tasks) to lose the answer of
	finishes atomic.Int32 // finishes to lose the answer of
	lost     atomic.Int32 // answers lost
}

func lostAnswer(what string) error {
	return fmt.Errorf("drivertest: %s: %w: invalid connection", what, driver.ErrUnavailable)
}

func (l *lostAnswers) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	rows, err := l.Driver.Claim(ctx, p)
	if err == nil && len(rows) > 0 && l.claims.Add(-1) >= 0 {
		l.lost.Add(1)
		return nil, lostAnswer("claim tasks")
	}
	return rows, err
}

func (l *lostAnswers) Finish(ctx context.Context, p driver.FinishParams) ([]int64, error) {
	ids, err := l.Driver.Finish(ctx, p)
	if err == nil && len(ids) > 0 && l.finishes.Add(-1) >= 0 {
		l.lost.Add(1)
		return nil, lostAnswer("finish tasks")
	}
	return ids, err
}

// warnings records the messages logged at WARN or above, and passes every
// record on.
type warnings struct {
	slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newWarnings(h slog.Handler) *warnings {
	return &warnings{Handler: h, mu: new(sync.Mutex), msgs: new([]string)}
}

func (w *warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		*w.msgs = append(*w.msgs, r.Message)
		w.mu.Unlock()
	}
	return w.Handler.Handle(ctx, r)
}

func (w *warnings) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnings{Handler: w.Handler.WithAttrs(as), mu: w.mu, msgs: w.msgs}
}

func (w *warnings) WithGroup(name string) slog.Handler {
	return &warnings{Handler: w.Handler.WithGroup(name), mu: w.mu, msgs: w.msgs}
}

func (w *warnings) with(s string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, m := range *w.msgs {
		if strings.Contains(m, s) {
			out = append(out, m)
		}
	}
	return out
}

// testEngineClaimOutcomeUnknown: a claim committed but its answer was lost.
// The worker reads back what the claim took under its name and fence and
// runs those tasks now, once each, instead of leaving them running until
// their lease runs out (the fake clock stands still: no rescue comes).
func testEngineClaimOutcomeUnknown(t *testing.T, e *env) {
	drv := &lostAnswers{Driver: e.drv}
	drv.claims.Store(1)
	var mu sync.Mutex
	runs := map[int64][]int{}
	c := e.newClient(keel.Config{Driver: drv, Types: []string{"dt.task"}})
	h := keel.NewHandlers()
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error {
		mu.Lock()
		runs[task.ID] = append(runs[task.ID], task.Attempt)
		mu.Unlock()
		return nil
	})
	infos := []*keel.TaskInfo{e.enqueue(c, 1), e.enqueue(c, 2), e.enqueue(c, 3)}
	w := e.newClient(keel.Config{Driver: drv, Handlers: h})
	e.startClient(w)
	for _, info := range infos {
		e.waitState(info.ID, driver.StateSucceeded)
	}
	if drv.lost.Load() == 0 {
		t.Fatal("no claim's answer was lost: the test tested nothing")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, info := range infos {
		if got := runs[info.ID]; !slices.Equal(got, []int{1}) {
			t.Errorf("task %d ran attempts %v, want [1]", info.ID, got)
		}
	}
}

// testEngineFinishOutcomeUnknown: a finish committed but its answer was
// lost. The completer's retry finds the tasks in the state it wrote and
// counts them done: no "lease lost" for an outcome keel itself stored.
func testEngineFinishOutcomeUnknown(t *testing.T, e *env) {
	drv := &lostAnswers{Driver: e.drv}
	drv.finishes.Store(1)
	logs := newWarnings(slog.NewTextHandler(e.t.Output(), nil))
	var fail atomic.Bool
	fail.Store(true)
	c := e.worker(keel.Config{Driver: drv, Logger: slog.New(logs)}, func(ctx context.Context, task *keel.Task[args]) error {
		if task.Args.N == 2 && fail.Load() {
			return fmt.Errorf("boom")
		}
		return nil
	})
	ok := e.enqueue(c, 1)
	retried := e.enqueue(c, 2)
	e.waitState(ok.ID, driver.StateSucceeded)
	row := e.waitErrors(retried.ID, 1)
	if row.State != driver.StatePending || row.Attempt != 1 {
		t.Fatalf("failed task: %s attempt %d, want pending after attempt 1", row.State, row.Attempt)
	}
	deadline := time.Now().Add(5 * time.Second)
	for drv.lost.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if drv.lost.Load() == 0 {
		t.Fatal("no finish's answer was lost: the test tested nothing")
	}
	// The retry's outcome is reported once the completer has it.
	marker := e.enqueue(c, 3)
	e.waitState(marker.ID, driver.StateSucceeded)
	time.Sleep(50 * time.Millisecond)
	if got := logs.with("lease lost"); len(got) > 0 {
		t.Fatalf("the retried finish of a committed outcome was logged as %q", got)
	}
}
