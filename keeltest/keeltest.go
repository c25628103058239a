// Package keeltest helps users test code built on keel.
//
// Run calls a handler once on a synthetic task, without a database, and
// classifies the outcome the way a worker would (succeeded, retry,
// permanent, snooze, panic, timeout):
//
//	out := keeltest.Run(ctx, sendEmail, EmailArgs{To: "a@example.com"})
//	if out.Kind != keeltest.KindSucceeded {
//		t.Fatalf("send email: %v", out)
//	}
//
// NewClient gives a test a Client on its own temporary SQLite database,
// closed when the test ends; RequireEnqueued asserts that the code under
// test enqueued a task, and WaitFinished waits for a task to finish:
//
//	c := keeltest.NewClient(t, keel.Config{Types: []string{"email.send"}})
//	signUp(ctx, c, "a@example.com") // the code under test enqueues
//	keeltest.RequireEnqueued(t, c, "email.send", EmailArgs{To: "a@example.com"})
package keeltest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
)

// NewClient returns a client on a new SQLite database in t.TempDir(). When
// the test ends it stops the client's workers (if started) and closes the
// database. cfg.Driver must be nil: NewClient opens the driver; reach it
// with Client.Driver() (for transactions, through driver.DBer).
//
// Fields left zero get test-friendly values instead of keel's production
// defaults, so retries and scheduled tasks do not slow tests down:
// PollInterval 10ms, BackoffBase 10ms, BackoffMax 100ms, and a Logger that
// writes to t.Log. The database runs with synchronous=NORMAL (a test does
// not need to survive power loss). NewClient does not call Start.
func NewClient(t testing.TB, cfg keel.Config) *keel.Client {
	t.Helper()
	if cfg.Driver != nil {
		t.Fatalf("keeltest.NewClient: leave Config.Driver nil; NewClient opens a temporary SQLite database")
	}
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatalf("keeltest.NewClient: open SQLite: %v", err)
	}
	t.Cleanup(func() {
		if err := drv.Close(); err != nil {
			t.Errorf("keeltest.NewClient: close SQLite: %v", err)
		}
	})
	cfg.Driver = drv
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = 10 * time.Millisecond
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = max(100*time.Millisecond, cfg.BackoffBase)
	}
	if cfg.Logger == nil {
		w := &testLogWriter{t: t}
		t.Cleanup(w.close) // runs after the client's Stop below
		cfg.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := keel.NewClient(cfg)
	if err != nil {
		t.Fatalf("keeltest.NewClient: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("keeltest.NewClient: stop client: %v", err)
		}
	})
	return c
}

// testLogWriter sends log lines to t.Log until the test is over; writing
// to t.Log afterwards would panic.
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// maxListed bounds how many tasks a failure message lists.
const maxListed = 20

// RequireEnqueued asserts that c's database holds a task of taskType whose
// payload equals payload, compared as canonical JSON (object keys sorted,
// no insignificant whitespace), in any state. It returns the newest such
// task. On failure it lists the tasks of that type (or, if there are none,
// the types present) and stops the test with t.Fatalf.
func RequireEnqueued(t testing.TB, c *keel.Client, taskType string, payload any) *keel.TaskInfo {
	t.Helper()
	want, err := canonicalPayload(payload)
	if err != nil {
		t.Fatalf("keeltest.RequireEnqueued: %v", err)
		return nil
	}
	tasks, err := listAll(context.Background(), c, keel.Filter{Type: taskType})
	if err != nil {
		t.Fatalf("keeltest.RequireEnqueued: list tasks: %v", err)
		return nil
	}
	for _, ti := range tasks {
		if string(ti.Payload) == want {
			return ti
		}
	}
	t.Fatalf("keeltest.RequireEnqueued: no %q task with payload %s was enqueued; %s", taskType, want, describe(c, taskType, tasks))
	return nil
}

// RequireNotEnqueued asserts that c's database holds no task of taskType
// with that payload (compared as canonical JSON); a nil payload means no
// task of taskType at all. On failure it lists the offending tasks and
// stops the test with t.Fatalf.
func RequireNotEnqueued(t testing.TB, c *keel.Client, taskType string, payload any) {
	t.Helper()
	tasks, err := listAll(context.Background(), c, keel.Filter{Type: taskType})
	if err != nil {
		t.Fatalf("keeltest.RequireNotEnqueued: list tasks: %v", err)
		return
	}
	if payload != nil {
		want, err := canonicalPayload(payload)
		if err != nil {
			t.Fatalf("keeltest.RequireNotEnqueued: %v", err)
			return
		}
		var match []*keel.TaskInfo
		for _, ti := range tasks {
			if string(ti.Payload) == want {
				match = append(match, ti)
			}
		}
		tasks = match
	}
	if len(tasks) > 0 {
		t.Fatalf("keeltest.RequireNotEnqueued: found %d %q task(s):\n%s", len(tasks), taskType, formatTasks(tasks))
	}
}

// WaitFinished waits until the task with id is succeeded, dead or
// cancelled, polling every 5ms, and returns it. It stops the test with
// t.Fatalf if that takes longer than timeout (0 means 10s), showing the
// task as it last was.
func WaitFinished(t testing.TB, c *keel.Client, id int64, timeout time.Duration) *keel.TaskInfo {
	t.Helper()
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		ti, err := c.Get(ctx, id)
		if err != nil {
			t.Fatalf("keeltest.WaitFinished: get task %d: %v", id, err)
			return nil
		}
		switch ti.State {
		case keel.StateSucceeded, keel.StateDead, keel.StateCancelled:
			return ti
		}
		if time.Now().After(deadline) {
			t.Fatalf("keeltest.WaitFinished: task %d not finished after %v (did you Start the client?):\n%s",
				id, timeout, formatTasks([]*keel.TaskInfo{ti}))
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// canonicalPayload encodes payload the way Enqueue stores it.
func canonicalPayload(payload any) (string, error) {
	b, err := encodePayload(payload)
	if err != nil {
		return "", err
	}
	canon, err := canonical(b)
	if err != nil {
		return "", fmt.Errorf("payload: %w", err)
	}
	return string(canon), nil
}

// listAll pages through every task matching p, newest first.
func listAll(ctx context.Context, c *keel.Client, p keel.Filter) ([]*keel.TaskInfo, error) {
	if c == nil {
		return nil, errors.New("nil client")
	}
	p.Limit = 1000
	var all []*keel.TaskInfo
	for {
		page, err := c.List(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < p.Limit {
			return all, nil
		}
		p.BeforeID = page[len(page)-1].ID
	}
}

// describe says what was enqueued instead, for a failure message.
func describe(c *keel.Client, taskType string, ofType []*keel.TaskInfo) string {
	if len(ofType) > 0 {
		return fmt.Sprintf("the %d %q task(s) enqueued, newest first:\n%s", len(ofType), taskType, formatTasks(ofType))
	}
	all, err := listAll(context.Background(), c, keel.Filter{})
	if err != nil {
		return fmt.Sprintf("no %q tasks at all (listing the others failed: %v)", taskType, err)
	}
	if len(all) == 0 {
		return "no tasks were enqueued at all"
	}
	counts := map[string]int{}
	var types []string
	for _, ti := range all {
		if counts[ti.Type] == 0 {
			types = append(types, ti.Type)
		}
		counts[ti.Type]++
	}
	parts := make([]string, len(types))
	for i, typ := range types {
		parts[i] = fmt.Sprintf("%q ×%d", typ, counts[typ])
	}
	return fmt.Sprintf("no %q tasks at all; enqueued types: %s", taskType, strings.Join(parts, ", "))
}

func formatTasks(tasks []*keel.TaskInfo) string {
	var b strings.Builder
	for i, ti := range tasks {
		if i == maxListed {
			fmt.Fprintf(&b, "  … and %d more\n", len(tasks)-maxListed)
			break
		}
		fmt.Fprintf(&b, "  #%d %s %s queue=%s attempt=%d/%d payload=%s\n",
			ti.ID, ti.Type, ti.State, ti.Queue, ti.Attempt, ti.MaxAttempts, ti.Payload)
	}
	return strings.TrimRight(b.String(), "\n")
}
