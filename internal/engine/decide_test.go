package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/outcome"
)

func TestDecide(t *testing.T) {
	e := &Engine{cfg: Config{Node: "n1",
		Backoff:     backoff.Policy{Base: time.Second, Max: time.Minute},
		TypeBackoff: map[string]backoff.Policy{"slow": {Base: 10 * time.Second, Max: time.Hour}},
		MaxSnoozes:  3, TypeMaxSnoozes: map[string]int{"sleepy": 5},
	}}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Second)
	stopping, stop := context.WithCancelCause(context.Background())
	stop(ErrStopping)
	var netTimeout net.Error = &net.DNSError{IsTimeout: true}
	cases := []struct {
		name    string
		ctx     context.Context
		typ     string
		attempt int
		snoozes int
		res     result
		state   driver.State
		runAt   time.Time
		outcome driver.Outcome // "" when no error is recorded
		refund  bool
		snooze  bool
	}{
		{name: "success", res: result{value: []byte(`1`)}, state: driver.StateSucceeded},
		{name: "error retries with backoff", res: result{err: errors.New("x")}, state: driver.StatePending,
			runAt: end.Add(2 * time.Second), outcome: driver.OutcomeError, attempt: 2},
		{name: "type backoff", typ: "slow", res: result{err: errors.New("x")}, state: driver.StatePending,
			runAt: end.Add(10 * time.Second), outcome: driver.OutcomeError},
		{name: "last attempt dies", attempt: 3, res: result{err: errors.New("x")}, state: driver.StateDead, outcome: driver.OutcomeError},
		{name: "permanent dies at once", res: result{err: fmt.Errorf("w: %w", &outcome.Permanent{Err: errors.New("x")})},
			state: driver.StateDead, outcome: driver.OutcomePermanent},
		{name: "retry after", res: result{err: &outcome.RetryAfter{Err: errors.New("x"), Delay: time.Hour}},
			state: driver.StatePending, runAt: end.Add(time.Hour), outcome: driver.OutcomeError},
		{name: "negative retry after is now", res: result{err: &outcome.RetryAfter{Err: errors.New("x"), Delay: -time.Hour}},
			state: driver.StatePending, runAt: end, outcome: driver.OutcomeError},
		{name: "snooze refunds", res: result{err: fmt.Errorf("w: %w", &outcome.Snooze{Delay: time.Minute})},
			state: driver.StatePending, runAt: end.Add(time.Minute), refund: true, snooze: true},
		{name: "last snooze allowed", snoozes: 2, res: result{err: &outcome.Snooze{Delay: time.Minute}},
			state: driver.StatePending, runAt: end.Add(time.Minute), refund: true, snooze: true},
		{name: "snooze past the maximum dies", snoozes: 3, res: result{err: &outcome.Snooze{Delay: time.Minute}},
			state: driver.StateDead, outcome: driver.OutcomeSnoozed},
		{name: "type's own snooze maximum", typ: "sleepy", snoozes: 4, res: result{err: &outcome.Snooze{Delay: time.Minute}},
			state: driver.StatePending, runAt: end.Add(time.Minute), refund: true, snooze: true},
		{name: "type's own snooze maximum reached", typ: "sleepy", snoozes: 5, res: result{err: &outcome.Snooze{Delay: time.Minute}},
			state: driver.StateDead, outcome: driver.OutcomeSnoozed},
		{name: "panic", res: result{err: errors.New("panic: x"), panic: true, stack: "s"}, state: driver.StatePending,
			runAt: end.Add(time.Second), outcome: driver.OutcomePanic},
		{name: "timeout", res: result{err: fmt.Errorf("%w after 1s", ErrTimeout)}, state: driver.StatePending,
			runAt: end.Add(time.Second), outcome: driver.OutcomeTimeout},
		{name: "network timeout", res: result{err: fmt.Errorf("call: %w", netTimeout)}, state: driver.StatePending,
			runAt: end.Add(time.Second), outcome: driver.OutcomeTimeout},
		{name: "stop releases, refunded", ctx: stopping, res: result{err: context.Canceled}, state: driver.StatePending,
			runAt: end, refund: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			row := &driver.TaskRow{ID: 7, Fence: 9, Type: tc.typ, Attempt: max(tc.attempt, 1), MaxAttempts: 3, Snoozes: tc.snoozes}
			got := e.decide(ctx, row, tc.res, start, end)
			if got.ID != 7 || got.Fence != 9 || got.State != tc.state || !got.RunAt.Equal(tc.runAt) || got.Refund != tc.refund ||
				got.Snooze != tc.snooze {
				t.Fatalf("got %+v", got)
			}
			if tc.outcome == driver.OutcomeSnoozed && !strings.Contains(got.Error.Error, fmt.Sprintf("%d snoozes", tc.snoozes)) {
				t.Fatalf("error %q does not say how many snoozes", got.Error.Error)
			}
			switch {
			case tc.outcome == "" && got.Error != nil:
				t.Fatalf("recorded an error: %+v", got.Error)
			case tc.outcome != "" && (got.Error == nil || got.Error.Outcome != tc.outcome || got.Error.Node != "n1" ||
				got.Error.Attempt != row.Attempt || !got.Error.Start.Equal(start) || !got.Error.End.Equal(end)):
				t.Fatalf("error %+v, want outcome %s", got.Error, tc.outcome)
			}
		})
	}
}

// TestClaimable: a queue claims up to its free slots, and stops while the
// outcomes waiting for their commit pass half its limit more than the
// slots left.
func TestClaimable(t *testing.T) {
	for _, c := range []struct{ limit, active, finishing, want int }{
		{10, 0, 0, 10},
		{10, 4, 0, 6},
		{10, 0, 5, 10}, // outcomes within half the limit: every slot
		{10, 0, 10, 5}, // a whole limit waiting: half the slots
		{10, 0, 15, 0}, // one and a half: no claim until commits land
		{10, 2, 13, 0}, //
		{10, 10, 0, 0}, // every slot busy
		{1000, 0, 1000, 500},
		{0, 0, 0, 0}, // paused
		{1, 0, 1, 1}, // half of one slot rounds up: a lone worker claims beside its commit
		{1, 0, 2, 0},
		{3, 0, 5, 0},
		{3, 0, 4, 1},
	} {
		if got := claimable(c.limit, c.active, c.finishing); got != c.want {
			t.Errorf("claimable(limit %d, active %d, finishing %d) = %d, want %d", c.limit, c.active, c.finishing, got, c.want)
		}
	}
}
