package keeltest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/keeltest"
)

type emailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	secret  string // not encoded: lost on the way through JSON
}

func TestRunSucceededWithResult(t *testing.T) {
	t.Parallel()
	h := func(ctx context.Context, task *keel.Task[emailArgs]) error {
		if task.Args.secret != "" {
			return errors.New("unexported field survived JSON")
		}
		return task.SetResult(map[string]any{"sent_to": task.Args.To, "attempt": task.Attempt})
	}
	out := keeltest.Run(context.Background(), h, emailArgs{To: "a@example.com", Subject: "hi", secret: "x"})
	if out.Kind != keeltest.KindSucceeded || out.State != keel.StateSucceeded || out.Err != nil {
		t.Fatalf("outcome = %v, want succeeded", out)
	}
	if got, want := string(out.Result), `{"attempt":1,"sent_to":"a@example.com"}`; got != want {
		t.Errorf("result = %s, want %s", got, want)
	}
	if got, want := string(out.Task.Payload), `{"to":"a@example.com","subject":"hi"}`; got != want {
		t.Errorf("payload = %s, want %s", got, want)
	}
	if out.Task.ID != 1 || out.Task.Type != "test" || out.Task.Queue != keel.DefaultQueue || out.Task.MaxAttempts != 4 {
		t.Errorf("synthetic task defaults = %+v", out.Task)
	}
}

func TestRunOptionsReachTheTask(t *testing.T) {
	t.Parallel()
	created := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var seen keel.Task[int]
	h := func(ctx context.Context, task *keel.Task[int]) error {
		seen = *task
		return nil
	}
	keeltest.Run(context.Background(), h, 7, keeltest.TaskID(42), keeltest.Type("report.build"),
		keeltest.Queue("batch"), keeltest.Priority(-5), keeltest.Attempt(3), keeltest.MaxAttempts(9),
		keeltest.CreatedAt(created))
	if seen.ID != 42 || seen.Type != "report.build" || seen.Queue != "batch" || seen.Priority != -5 ||
		seen.Attempt != 3 || seen.MaxAttempts != 9 || !seen.CreatedAt.Equal(created) || seen.Args != 7 {
		t.Errorf("task = %+v", seen)
	}
}

func TestRunClassifiesLikeAWorker(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name      string
		ret       func(ctx context.Context) error
		opts      []keeltest.Option
		kind      keeltest.Kind
		state     keel.State
		delay     time.Duration
		errSubstr string
	}{
		{name: "error retries", ret: func(context.Context) error { return boom },
			kind: keeltest.KindRetry, state: keel.StatePending, errSubstr: "boom"},
		{name: "error on last attempt dead-letters", ret: func(context.Context) error { return boom },
			opts: []keeltest.Option{keeltest.Attempt(4)}, kind: keeltest.KindRetry, state: keel.StateDead},
		{name: "permanent", ret: func(context.Context) error { return keel.Permanent(boom) },
			kind: keeltest.KindPermanent, state: keel.StateDead, errSubstr: "permanent: boom"},
		{name: "wrapped permanent", ret: func(context.Context) error { return fmt.Errorf("send: %w", keel.Permanent(boom)) },
			kind: keeltest.KindPermanent, state: keel.StateDead},
		{name: "retry after", ret: func(context.Context) error { return keel.RetryAfter(boom, 3*time.Second) },
			kind: keeltest.KindRetry, state: keel.StatePending, delay: 3 * time.Second},
		{name: "retry after on last attempt", ret: func(context.Context) error { return keel.RetryAfter(boom, time.Second) },
			opts: []keeltest.Option{keeltest.Attempt(2), keeltest.MaxAttempts(2)}, kind: keeltest.KindRetry, state: keel.StateDead},
		{name: "snooze", ret: func(context.Context) error { return keel.Snooze(5 * time.Minute) },
			kind: keeltest.KindSnooze, state: keel.StatePending, delay: 5 * time.Minute},
		{name: "snooze on last attempt keeps the task", ret: func(context.Context) error { return keel.Snooze(time.Second) },
			opts: []keeltest.Option{keeltest.Attempt(4)}, kind: keeltest.KindSnooze, state: keel.StatePending, delay: time.Second},
		{name: "panic", ret: func(context.Context) error { panic("nil map") },
			kind: keeltest.KindPanic, state: keel.StatePending, errSubstr: "panic: nil map"},
		{name: "timeout", ret: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			opts: []keeltest.Option{keeltest.Timeout(10 * time.Millisecond)}, kind: keeltest.KindTimeout, state: keel.StatePending},
		{name: "handler ignoring its context", ret: func(ctx context.Context) error { time.Sleep(300 * time.Millisecond); return nil },
			opts: []keeltest.Option{keeltest.Timeout(10 * time.Millisecond), keeltest.TimeoutGrace(20 * time.Millisecond)},
			kind: keeltest.KindTimeout, state: keel.StatePending, errSubstr: "did not return"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := func(ctx context.Context, task *keel.Task[struct{}]) error { return tc.ret(ctx) }
			out := keeltest.Run(context.Background(), h, struct{}{}, tc.opts...)
			if out.Kind != tc.kind || out.State != tc.state || out.Delay != tc.delay {
				t.Errorf("outcome = %v (delay %v), want %s, next state %s, delay %v", out, out.Delay, tc.kind, tc.state, tc.delay)
			}
			if out.Err == nil || !strings.Contains(out.Err.Error(), tc.errSubstr) {
				t.Errorf("err = %v, want it to contain %q", out.Err, tc.errSubstr)
			}
			if tc.kind == keeltest.KindPanic && !strings.Contains(out.Stack, "goroutine") {
				t.Errorf("panic outcome without a stack: %q", out.Stack)
			}
		})
	}
}

// strict fails to decode, as a payload of an old or foreign shape would.
type strict struct{ N int }

func (s *strict) UnmarshalJSON([]byte) error { return errors.New("strict: refusing") }

func TestRunPayloadThatDoesNotDecodeIsPermanent(t *testing.T) {
	t.Parallel()
	called := false
	h := func(ctx context.Context, task *keel.Task[strict]) error { called = true; return nil }
	out := keeltest.Run(context.Background(), h, strict{N: 1})
	if called || out.Kind != keeltest.KindPermanent || out.State != keel.StateDead || !keel.IsPermanent(out.Err) {
		t.Fatalf("called=%v outcome=%v, want the handler skipped and a permanent failure", called, out)
	}
}

func TestRunArgsThatCannotBeEncoded(t *testing.T) {
	t.Parallel()
	h := func(ctx context.Context, task *keel.Task[chan int]) error { return nil }
	out := keeltest.Run(context.Background(), h, make(chan int))
	if out.Kind != keeltest.KindInvalid || !errors.Is(out.Err, keel.ErrInvalid) {
		t.Fatalf("outcome = %v, want invalid wrapping keel.ErrInvalid", out)
	}
}

func TestRunResultIsJSON(t *testing.T) {
	t.Parallel()
	h := func(ctx context.Context, task *keel.Task[[]int]) error {
		sum := 0
		for _, v := range task.Args {
			sum += v
		}
		return task.SetResult(sum)
	}
	out := keeltest.Run(context.Background(), h, []int{1, 2, 3})
	var sum int
	if err := json.Unmarshal(out.Result, &sum); err != nil || sum != 6 {
		t.Fatalf("result = %s (%v), want 6", out.Result, err)
	}
}
