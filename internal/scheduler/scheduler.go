// Package scheduler enqueues the due ticks of the stored schedules
// (periodic tasks): every Interval the leader reads every schedule, finds
// its latest due tick, applies its missed-tick policy and has the driver
// advance the schedule and insert the tick's task in one transaction, so
// each tick is enqueued once across processes and leader changes.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Interval is how often the leader looks for due ticks. Passes fall
// just after each whole Interval of the clock (Offset after it), so a
// tick, always on a whole second, is enqueued about Offset after its time.
const Interval = time.Second

// Offset is how long after each whole Interval a pass runs. A pass that
// ran on the boundary itself could read the clock a moment before a tick
// came due and find it one pass later, with the tick after it: one tick
// passed over and logged as missed.
const Offset = 10 * time.Millisecond

// SkipGrace is how late a tick may be enqueued under driver.MissedSkip: a
// tick found due longer ago than this counts as missed.
const SkipGrace = 10 * time.Second

// KeyPrefix begins the idempotency keys of schedules' tasks.
const KeyPrefix = "keel.schedule:"

// The meta keys of a schedule's tasks.
const (
	MetaSchedule = "keel.schedule"
	MetaTick     = "keel.tick"
	MetaTrigger  = "keel.trigger"
)

// TickKey is the idempotency key of schedule name's task for tick.
func TickKey(name string, tick time.Time) string {
	return fmt.Sprintf("%s%s:%d", KeyPrefix, name, tick.Unix())
}

// ManualKey is the idempotency key of a task of schedule name triggered
// by hand at now.
func ManualKey(name string, now time.Time) string {
	return fmt.Sprintf("%s%s:manual:%d", KeyPrefix, name, now.UnixNano())
}

// Store is what a Scheduler needs of a driver: its loop, and the API's
// calls on stored schedules (api.go).
type Store interface {
	UpsertSchedules(ctx context.Context, params []driver.ScheduleParams) error
	ListSchedules(ctx context.Context) ([]driver.ScheduleRow, error)
	EnqueueTick(ctx context.Context, params driver.TickParams) (*driver.InsertResult, bool, error)
	GetSchedule(ctx context.Context, name string) (*driver.ScheduleRow, error)
	PauseSchedule(ctx context.Context, params driver.PauseScheduleParams) (*driver.ScheduleRow, error)
	DeleteSchedule(ctx context.Context, name string) error
	Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error)
}

// Config wires a Scheduler.
type Config struct {
	Driver Store
	// Schedules are the configured schedules, validated; StoreConfigured
	// writes them.
	Schedules []driver.ScheduleParams
	// Clock paces the passes; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the work: only the elected leader enqueues ticks.
	Leading func() bool
	// Task builds the insert of one task of schedule s, with the given
	// idempotency key and meta, as of now (the client's option
	// validation and the type's stored defaults apply).
	Task func(ctx context.Context, s *driver.ScheduleRow, key string, meta map[string]string, now time.Time) (*driver.InsertParams, error)
	// Enqueued is told about every tick's task inserted (or found holding
	// its key: res.Duplicate) for schedule name, and about every manual
	// trigger's.
	Enqueued func(name string, res *driver.InsertResult)
	// Wrap turns a driver's error into the error the API's calls return
	// (the client marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// Scheduler is the schedule service.
type Scheduler struct {
	cfg  Config
	clk  service.Clock
	loop *service.Loop
	// warned holds name + spec + zone of each schedule found unreadable,
	// logged once.
	warned sync.Map
	// failures counts the loop's passes failed in a row, to log a lasting
	// failure once a minute only; only the loop's goroutine touches it.
	failures int
}

// New returns a Scheduler.
func New(cfg Config) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Wrap == nil {
		cfg.Wrap = func(_ context.Context, err error) error { return err }
	}
	return &Scheduler{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// StoreConfigured writes Config.Schedules (the definition given wins; a
// pause set through the API stays). The error is the driver's.
func (s *Scheduler) StoreConfigured(ctx context.Context) error {
	if len(s.cfg.Schedules) == 0 {
		return nil
	}
	now := s.clk.Now()
	ps := make([]driver.ScheduleParams, len(s.cfg.Schedules))
	for i, p := range s.cfg.Schedules {
		p.Now = now
		ps[i] = p
	}
	return s.cfg.Driver.UpsertSchedules(ctx, ps)
}

// Start runs a pass at once, then Offset after every whole Interval,
// each while leading. It reads every stored schedule, not only the
// configured ones, so a schedule runs whichever process leads.
func (s *Scheduler) Start(ctx context.Context) {
	s.loop = service.Start(ctx, func(ctx context.Context) {
		for {
			s.pass(ctx)
			select {
			case <-ctx.Done():
				return
			case <-s.clk.After(untilNextPass(s.clk.Now())):
			}
		}
	})
}

// untilNextPass returns how long from now to the next time that is Offset
// after a whole Interval.
func untilNextPass(now time.Time) time.Duration {
	next := now.Truncate(Interval).Add(Offset)
	if !next.After(now) {
		next = next.Add(Interval)
	}
	return next.Sub(now)
}

// Stop stops the service.
func (s *Scheduler) Stop() { s.loop.Stop() }

// pass is one run of the loop: RunOnce while leading, a lasting failure
// logged once a minute.
func (s *Scheduler) pass(ctx context.Context) {
	if !s.cfg.Leading() {
		return
	}
	err := s.RunOnce(ctx)
	switch {
	case err == nil:
		s.failures = 0
	case ctx.Err() == nil:
		if s.failures%60 == 0 {
			s.cfg.Logger.Warn("keel: enqueuing due schedule ticks failed; retried every second", "error", err, "failures_in_a_row", s.failures+1)
		}
		s.failures++
	}
}

// RunOnce enqueues the due tick of every schedule that has one. A
// schedule this process cannot read is logged once and left to a leader
// that can.
func (s *Scheduler) RunOnce(ctx context.Context) error {
	rows, err := s.cfg.Driver.ListSchedules(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for i := range rows {
		r := &rows[i]
		if r.Paused {
			continue
		}
		sched, _, err := Parse(r.Spec, r.TimeZone)
		if err != nil {
			if _, seen := s.warned.LoadOrStore(r.Name+"\n"+r.Spec+"\n"+r.TimeZone, true); !seen {
				s.cfg.Logger.Error("keel: this process cannot read a schedule; its ticks wait for a leader that can",
					"schedule", r.Name, "error", err)
			}
			continue
		}
		if err := s.runSchedule(ctx, r, sched); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d schedules: %w", len(errs), errs[0])
	}
	return nil
}

// runSchedule enqueues the latest due tick of r, if any, under its missed
// policy: the ticks before it are passed over.
func (s *Scheduler) runSchedule(ctx context.Context, r *driver.ScheduleRow, sched cron.Schedule) error {
	now := s.clk.Now()
	tick, many := latestDue(sched, r.LastTick, now)
	if tick.IsZero() {
		return nil
	}
	missed := many || now.Sub(tick) > SkipGrace
	var task *driver.InsertParams
	if r.Missed != driver.MissedSkip || now.Sub(tick) <= SkipGrace {
		var err error
		task, err = s.cfg.Task(ctx, r, TickKey(r.Name, tick), map[string]string{MetaSchedule: r.Name, MetaTick: tick.UTC().Format(time.RFC3339)}, now)
		if err != nil {
			return err
		}
	}
	res, advanced, err := s.cfg.Driver.EnqueueTick(ctx, driver.TickParams{Name: r.Name, Prev: r.LastTick, Tick: tick, Task: task, Now: now})
	if err != nil {
		return fmt.Errorf("schedule %s: %w", r.Name, err)
	}
	switch {
	case !advanced:
		// Another leader took the tick, or the schedule was paused.
	case res == nil:
		s.cfg.Logger.Warn("keel: schedule ticks missed and skipped", "schedule", r.Name,
			"last_tick", r.LastTick, "latest_due", tick, "policy", r.Missed)
	default:
		if missed {
			s.cfg.Logger.Warn("keel: schedule ticks missed; one task runs for the latest", "schedule", r.Name,
				"last_tick", r.LastTick, "tick", tick, "task_id", res.Task.ID)
		}
		s.cfg.Logger.Debug("keel: schedule tick enqueued", "schedule", r.Name, "tick", tick, "task_id", res.Task.ID,
			"type", res.Task.Type, "queue", res.Task.Queue)
		if s.cfg.Enqueued != nil {
			s.cfg.Enqueued(r.Name, res)
		}
	}
	return nil
}
