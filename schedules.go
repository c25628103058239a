package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/scheduler"
)

// Periodic tasks.
//
// A Schedule enqueues a task of its Type on every tick of its Spec, a cron
// expression read in its TimeZone. Schedules are given in
// Config.Schedules and stored in keel_schedules when the client starts
// (the definition in the config wins; a pause set through the API stays).
// Only the elected leader enqueues ticks, and each tick once: in one
// transaction the leader moves the schedule's last tick forward with a
// compare-and-set and inserts the tick's task, so a second leader (during
// a leader change) finds the tick taken and writes nothing, even when the
// first tick's task already finished, was dead-lettered or archived.

// MissedPolicy says what a schedule does with ticks that came due while
// no leader enqueued them (every process down, a leader change).
type MissedPolicy string

// The missed-tick policies.
const (
	// MissedRunOnce enqueues one task for the latest tick that came due,
	// at once; the earlier missed ticks never run. The default.
	MissedRunOnce MissedPolicy = driver.MissedRunOnce
	// MissedSkip enqueues nothing for missed ticks: the latest due tick
	// runs only if the leader reaches it within SkipGrace of its time,
	// and the schedule otherwise waits for its next tick.
	MissedSkip MissedPolicy = driver.MissedSkip
)

// SkipGrace is how late a tick may be enqueued under MissedSkip: a tick
// found due longer ago than this counts as missed.
const SkipGrace = scheduler.SkipGrace

// Schedule is a periodic task: a task of Type enqueued on every tick of
// Spec.
type Schedule struct {
	// Name identifies the schedule: 1–128 letters, digits and _ . : -.
	// Required.
	Name string
	// Spec is when it runs: a cron expression of five fields (minute,
	// hour, day of month, month, day of week: "*/5 * * * *"), or six with
	// seconds first ("*/10 * * * * *"), or a descriptor ("@hourly",
	// "@daily", "@weekly", "@monthly", "@yearly", "@every 90s"). An
	// "@every" interval counts from when the schedule was first stored,
	// in whole seconds. Required.
	Spec string
	// TimeZone is the IANA zone the cron fields are read in
	// ("Europe/Berlin"). Default "UTC".
	TimeZone string
	// Type is the task type enqueued. It needs no handler in this
	// process: another process may run it. Required.
	Type string
	// Queue is the queue the tasks go to. Default "default".
	Queue string
	// Payload is every task's payload, encoded as JSON ([]byte and
	// json.RawMessage must be JSON already), at most 64 KiB. Default {}.
	Payload any
	// Priority is the tasks' priority. Default 0.
	Priority int
	// Missed is what happens to ticks missed while no leader ran.
	// Default MissedRunOnce.
	Missed MissedPolicy
}

// ScheduleInfo is a stored schedule, as Client.Schedules lists it.
type ScheduleInfo struct {
	Name, Spec, TimeZone, Type, Queue string
	Payload                           json.RawMessage
	Priority                          int
	Missed                            MissedPolicy
	// Paused schedules enqueue nothing; a resume does not run the ticks
	// of the paused period.
	Paused bool
	// LastTick is the last tick enqueued (or passed over as missed), in
	// the schedule's zone; when no tick ran yet, the instant the schedule
	// was first stored.
	LastTick time.Time
	// NextRun is the next tick after now, in the schedule's zone; zero
	// while paused, or when the spec has no further tick.
	NextRun time.Time
	// Due is set when a tick came due that no leader enqueued yet (none
	// runs, or it is about to).
	Due bool
	// Error says why this process cannot read the spec or zone (a zone
	// this host has no data for); such a schedule runs on a leader that
	// can.
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Validate reports what is wrong with s (ErrInvalid), naming the
// schedule and the field; NewClient checks Config.Schedules with it.
func (s Schedule) Validate() error {
	_, err := s.params()
	return err
}

// params validates s and returns it as the driver stores it.
func (s Schedule) params() (driver.ScheduleParams, error) {
	p := driver.ScheduleParams{Name: s.Name, Spec: s.Spec, TimeZone: s.TimeZone, Type: s.Type, Queue: s.Queue,
		Priority: s.Priority, Missed: string(s.Missed)}
	if p.TimeZone == "" {
		p.TimeZone = "UTC"
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.Missed == "" {
		p.Missed = driver.MissedRunOnce
	}
	switch {
	case !driver.ValidScheduleName(s.Name):
		return p, invalid("schedule %q: invalid name: use 1-128 letters, digits, '_', '.', ':' or '-'", s.Name)
	case s.Spec == "":
		return p, invalid("schedule %q: Spec is required (a cron expression such as \"*/5 * * * *\", or \"@every 10s\")", s.Name)
	case !validName(s.Type):
		return p, invalid("schedule %q: invalid Type %q: use 1-128 letters, digits, '_', '.', ':' or '-'", s.Name, s.Type)
	case reservedType(s.Type):
		return p, invalid("schedule %q: Type %q: names starting with %q are reserved for keel's own tasks", s.Name, s.Type, reservedTypePrefix)
	case !validName(p.Queue):
		return p, invalid("schedule %q: invalid Queue %q", s.Name, p.Queue)
	case reservedQueue(p.Queue):
		return p, invalid("schedule %q: queue %q is reserved for keel's own tasks", s.Name, p.Queue)
	case s.Priority < -1_000_000 || s.Priority > 1_000_000:
		return p, invalid("schedule %q: Priority %d out of range [-1000000, 1000000]", s.Name, s.Priority)
	case p.Missed != driver.MissedRunOnce && p.Missed != driver.MissedSkip:
		return p, invalid("schedule %q: Missed must be %q or %q, got %q", s.Name, MissedRunOnce, MissedSkip, s.Missed)
	}
	if _, _, err := scheduler.Parse(s.Spec, p.TimeZone); err != nil {
		return p, invalid("schedule %q: %v", s.Name, err)
	}
	switch v := s.Payload.(type) {
	case json.RawMessage:
		p.Payload = v
	case []byte:
		p.Payload = v
	case nil:
		p.Payload = json.RawMessage("{}")
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return p, invalid("schedule %q: payload cannot be encoded as JSON: %v", s.Name, err)
		}
		p.Payload = raw
	}
	// Every trigger enqueues this payload: refuse now what no trigger
	// could enqueue (NUL, a lone surrogate, a key twice, deep nesting).
	if _, err := digest.Canonical(p.Payload); err != nil && json.Valid(p.Payload) {
		return p, invalid("schedule %q: %v", s.Name, err)
	}
	p.Now = time.Unix(1, 0) // checked here; the write sets its own time
	if err := p.Validate(); err != nil {
		return p, invalid("%v", err)
	}
	return p, nil
}

// validateSchedules checks Config.Schedules and returns them as the
// driver stores them.
func validateSchedules(schedules []Schedule, maxPayload int) ([]driver.ScheduleParams, error) {
	seen := map[string]bool{}
	var out []driver.ScheduleParams
	for i, s := range schedules {
		p, err := s.params()
		if err != nil {
			return nil, fmt.Errorf("Config.Schedules[%d]: %w", i, err)
		}
		if len(p.Payload) > maxPayload {
			return nil, fmt.Errorf("Config.Schedules[%d]: schedule %q: %w: %d bytes, the limit is %d", i, s.Name, ErrPayloadTooLarge, len(p.Payload), maxPayload)
		}
		if seen[s.Name] {
			return nil, invalid("Config.Schedules[%d]: schedule name %q used twice", i, s.Name)
		}
		seen[s.Name] = true
		out = append(out, p)
	}
	return out, nil
}

// newScheduler returns the service that enqueues c's schedules' ticks.
func newScheduler(c *Client) *scheduler.Scheduler {
	return scheduler.New(scheduler.Config{
		Driver: c.drv, Schedules: c.schedules, Now: c.cfg.Now, Logger: c.cfg.Logger,
		Leading: func() bool {
			return c.eng.Load().Leading()
		},
		Task: c.scheduleTask, Enqueued: c.scheduled,
	})
}

// Schedules lists the stored schedules by name, each with its next run
// in its own zone.
func (c *Client) Schedules(ctx context.Context) ([]*ScheduleInfo, error) {
	rows, err := c.drv.ListSchedules(ctx)
	if err != nil {
		return nil, fmt.Errorf("keel: list schedules: %w", unavailable(ctx, err))
	}
	now := c.cfg.Now()
	out := make([]*ScheduleInfo, len(rows))
	for i := range rows {
		out[i] = scheduleInfo(&rows[i], now)
	}
	return out, nil
}

// GetSchedule returns one stored schedule; ErrNotFound when there is no
// such schedule.
func (c *Client) GetSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	row, err := getSchedule(ctx, c.drv, name)
	if err != nil {
		return nil, err
	}
	return scheduleInfo(row, c.cfg.Now()), nil
}

func getSchedule(ctx context.Context, drv driver.ScheduleStore, name string) (*driver.ScheduleRow, error) {
	if !driver.ValidScheduleName(name) {
		return nil, invalid("invalid schedule name %q", name)
	}
	row, err := drv.GetSchedule(ctx, name)
	if errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("%w: no schedule %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("keel: get schedule: %w", unavailable(ctx, err))
	}
	return row, nil
}

// PauseSchedule pauses a schedule in every process: the leader enqueues
// none of its ticks until ResumeSchedule. ErrNotFound for an unknown name.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return pauseSchedule(ctx, c.drv, name, true, c.cfg.Now())
}

// ResumeSchedule resumes a paused schedule. The ticks of the paused period
// never run, whatever its missed policy: the next tick after the resume
// is the first. ErrNotFound for an unknown name.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return pauseSchedule(ctx, c.drv, name, false, c.cfg.Now())
}

func pauseSchedule(ctx context.Context, drv driver.ScheduleStore, name string, paused bool, now time.Time) (*ScheduleInfo, error) {
	if !driver.ValidScheduleName(name) {
		return nil, invalid("invalid schedule name %q", name)
	}
	row, err := drv.PauseSchedule(ctx, driver.PauseScheduleParams{Name: name, Paused: paused, Now: now})
	if errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("%w: no schedule %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("keel: pause schedule: %w", unavailable(ctx, err))
	}
	return scheduleInfo(row, now), nil
}

// DeleteSchedule deletes a stored schedule; the tasks it enqueued stay. A
// schedule still in some process's Config.Schedules comes back when that
// process starts. ErrNotFound for an unknown name.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	if !driver.ValidScheduleName(name) {
		return invalid("invalid schedule name %q", name)
	}
	err := c.drv.DeleteSchedule(ctx, name)
	if errors.Is(err, driver.ErrNotFound) {
		return fmt.Errorf("%w: no schedule %q", ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("keel: delete schedule: %w", unavailable(ctx, err))
	}
	return nil
}

// TriggerSchedule enqueues one task of the schedule now, also while it is
// paused, with the idempotency key "keel.schedule:<name>:manual:<unix
// nanoseconds>". The schedule's ticks are not moved.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*TaskInfo, error) {
	row, err := getSchedule(ctx, c.drv, name)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	p, err := c.scheduleTask(ctx, row, scheduler.ManualKey(row.Name, now), map[string]string{scheduler.MetaSchedule: row.Name, scheduler.MetaTrigger: "manual"}, now)
	if err != nil {
		return nil, err
	}
	res, err := c.drv.Insert(ctx, []driver.InsertParams{*p})
	if err != nil {
		return nil, fmt.Errorf("keel: trigger schedule %s: %w", row.Name, unavailable(ctx, err))
	}
	c.scheduled(row.Name, &res[0])
	info := infoFromRow(res[0].Task)
	info.Duplicate = res[0].Duplicate
	return info, nil
}

// scheduled tells this process's workers and observers about a task of
// schedule name that was inserted (or found holding its key).
func (c *Client) scheduled(name string, res *driver.InsertResult) {
	if !res.Duplicate {
		c.eng.Load().Wrote(res.Task)
	}
	if c.obs.active() {
		t := res.Task
		c.obs.emit(Event{Kind: EventEnqueued, TaskID: t.ID, Queue: t.Queue, Type: t.Type, Duplicate: res.Duplicate,
			State: t.State, Schedule: name})
	}
}

// scheduleTask builds the insert of one task of schedule s. Its type may
// be one this client does not know: the stored declaration's defaults
// (max attempts, timeout) apply, as for keel serve's enqueues.
func (c *Client) scheduleTask(ctx context.Context, s *driver.ScheduleRow, key string, meta map[string]string, now time.Time) (*driver.InsertParams, error) {
	var stored map[string]*driver.TypeDefaults
	if o, known := c.types[s.Type]; !known || !o.Declared() {
		var err error
		if stored, err = c.decl.Stored(ctx, []string{s.Type}); err != nil {
			return nil, err
		}
	}
	p, err := c.prep.Prepare(enqueue.Spec{Type: s.Type, Payload: json.RawMessage(s.Payload), Options: []func(*options){
		Queue(s.Queue), Priority(s.Priority), IdempotencyKey(key), Meta(meta),
	}}, now, stored, true)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	return &p, nil
}

// scheduleInfo turns a row into what the API shows, in the row's zone.
func scheduleInfo(r *driver.ScheduleRow, now time.Time) *ScheduleInfo {
	info := &ScheduleInfo{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Type: r.Type, Queue: r.Queue,
		Payload: r.Payload, Priority: r.Priority, Missed: MissedPolicy(r.Missed), Paused: r.Paused,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	t, err := scheduler.Describe(r, now)
	if err != nil {
		info.Error = err.Error()
	}
	info.LastTick, info.NextRun, info.Due = t.LastTick, t.NextRun, t.Due
	return info
}
