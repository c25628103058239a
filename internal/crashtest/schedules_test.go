package crashtest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/proctest"
)

// tickType is the task type of the scheduled tasks.
const tickType = "crash.tick"

// scheduleLeaseTTL is the scheduling processes' lease: renewed every
// third of it, so a killed leader's lease outlives the kill by at least
// two thirds of it, 2.67s, and the ticks of at least one whole second
// come due while no leader runs.
const scheduleLeaseTTL = 4 * time.Second

// crashSchedules are the schedules every scheduling process configures:
// the same ones in both, as a deployment would.
var crashSchedules = []keel.Schedule{
	{Name: "every", Spec: "@every 1s", Type: tickType},
	{Name: "cron", Spec: "* * * * * *", Type: tickType, TimeZone: "Europe/Berlin"},
}

// newScheduler returns a worker client running crashSchedules, whose
// handler dead-letters every tick's task at once: a dead task releases its
// idempotency key, so a tick enqueued a second time would show as a
// second task instead of being deduplicated by the key.
func newScheduler(drv driver.Driver, node string) (*keel.Client, error) {
	h := keel.NewHandlers()
	keel.Handle(h, tickType, func(ctx context.Context, task *keel.Task[struct{}]) error {
		return keel.Permanent(errors.New("ticks are dead-lettered on purpose"))
	})
	return keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Node: node, Schedules: crashSchedules,
		LeaseTTL: scheduleLeaseTTL, HeartbeatInterval: time.Second, RescueInterval: rescueInterval,
		PollInterval: pollInterval, Alerts: keel.AlertConfig{Off: true},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
}

// tick is one scheduled task: its schedule and tick, from its key.
type tick struct {
	schedule string
	at       time.Time
	created  time.Time
	id       int64
}

// ticks returns the scheduled tasks by schedule, ordered by tick.
func (e *env) ticks() map[string][]tick {
	e.t.Helper()
	rows, err := e.drv.List(e.ctx, driver.Filter{Type: tickType, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]tick{}
	for _, r := range rows {
		// The key is "k:keel.schedule:<name>:<unix seconds>".
		parts := strings.Split(r.IdemKey, ":")
		if len(parts) != 4 || parts[1] != "keel.schedule" {
			e.t.Fatalf("task %d: key %q is not a schedule tick's", r.ID, r.IdemKey)
		}
		sec, err := strconv.ParseInt(parts[3], 10, 64)
		if err != nil {
			e.t.Fatalf("task %d: key %q: %v", r.ID, r.IdemKey, err)
		}
		out[parts[2]] = append(out[parts[2]], tick{schedule: parts[2], at: time.Unix(sec, 0), created: r.CreatedAt, id: r.ID})
	}
	for _, ts := range out {
		slices.SortFunc(ts, func(a, b tick) int { return a.at.Compare(b.at) })
	}
	return out
}

// scheduleFailover: two worker processes run the same schedules (@every
// 1s and a six-field cron spec); the leader is SIGKILLed after a few
// ticks and the other takes over. No tick is enqueued twice (its task is
// dead-lettered at once, releasing the key, so a second enqueue would be a
// second task); the ticks that came due while no leader ran get no task
// each but one task, for the latest of them (run once); ticks go on after
// the takeover.
func scheduleFailover(t *testing.T, b *backend) {
	e := setup(t, b)
	workers := map[string]*worker{}
	for _, n := range []string{"s1", "s2"} {
		workers[n] = scheduleWorker(e, n)
	}
	var old string
	e.waitFor("a leader that enqueued three ticks of each schedule", 30*time.Second, func() bool {
		old = e.leader()
		ts := e.ticks()
		return old != "" && len(ts["every"]) >= 3 && len(ts["cron"]) >= 3
	})
	killedAt := e.kill(workers[old])
	var next string
	e.waitFor("another node to take the leadership", scheduleLeaseTTL+slack, func() bool {
		next = e.leader()
		return next != "" && next != old
	})
	tookOver := time.Now()
	t.Logf("leader %s killed at %v; %s took over after %v", old, killedAt.Format("15:04:05.000"), next, tookOver.Sub(killedAt))
	e.waitFor("three ticks of each schedule after the takeover", 30*time.Second, func() bool {
		ts := e.ticks()
		for _, name := range []string{"every", "cron"} {
			n := 0
			for _, tk := range ts[name] {
				if tk.at.After(tookOver) {
					n++
				}
			}
			if n < 3 {
				return false
			}
		}
		return true
	})

	for name, ts := range e.ticks() {
		// Each tick once.
		for i := 1; i < len(ts); i++ {
			if ts[i].at.Equal(ts[i-1].at) {
				t.Errorf("schedule %s: tick %v enqueued twice (tasks %d and %d)", name, ts[i].at, ts[i-1].id, ts[i].id)
			}
		}
		// The last tick the killed leader enqueued, and the first after.
		last := -1
		for i, tk := range ts {
			if !tk.created.After(killedAt) {
				last = i
			}
		}
		if last < 0 || last+1 >= len(ts) {
			t.Fatalf("schedule %s: no tick before or after the kill: %v", name, ts)
		}
		before, after := ts[last], ts[last+1]
		// The lease outlives the kill by 2.67s at least: the ticks due up
		// to then came due while no leader ran.
		if !after.at.After(killedAt.Add(time.Second)) {
			t.Errorf("schedule %s: tick %v (task %d) came due while no leader ran, yet has a task of its own", name, after.at, after.id)
		}
		if gap := after.at.Sub(before.at); gap < 2*time.Second {
			t.Errorf("schedule %s: ticks %v and %v are %v apart: no tick was missed during the takeover", name, before.at, after.at, gap)
		}
		// Run once: the one task for the missed ticks is the latest's,
		// enqueued when the new leader found them.
		if late := after.created.Sub(after.at); late < 0 || late >= time.Second {
			t.Errorf("schedule %s: the catch-up task %d is for tick %v, enqueued %v later: not the latest due tick", name, after.id, after.at, late)
		}
		t.Logf("schedule %s: %d ticks; last before the kill %v, first after %v (created %v)", name, len(ts),
			before.at.Format("15:04:05"), after.at.Format("15:04:05"), after.created.Format("15:04:05.000"))
	}
	if got := e.leader(); got != next {
		t.Errorf("leadership moved again, to %q", got)
	}
	if logs := logLines(workers[next].Stderr.String(), "schedule ticks missed; one task runs for the latest"); len(logs) == 0 {
		t.Errorf("the new leader %s did not log the missed ticks", next)
	}
}

// scheduleWorker starts a scheduling worker process and waits until it runs.
func scheduleWorker(e *env, node string) *worker {
	e.t.Helper()
	return proctest.Start(e.t, node, e.helperCmd("schedule", node, 0))
}
