package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
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
const SkipGrace = 10 * time.Second

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

// cronParser reads specs of five or six fields and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSchedule reads a spec in a zone.
func parseSchedule(spec, zone string) (cron.Schedule, *time.Location, error) {
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, nil, errors.New("spec must not name a zone (TZ=...): set the time zone instead")
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "" || strings.EqualFold(zone, "local") {
		return nil, nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"UTC\" or \"Europe/Berlin\"", zone)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("spec %q: %v", spec, err)
	}
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		// cron runs an interval under a second every second, and cuts
		// the fraction off a longer one: refuse what would not run as
		// written.
		switch d, _ := time.ParseDuration(every); {
		case d < time.Second:
			return nil, nil, fmt.Errorf("spec %q: the interval must be at least 1s", spec)
		case d%time.Second != 0:
			return nil, nil, fmt.Errorf("spec %q: the interval must be whole seconds", spec)
		}
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	return s, loc, nil
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
	if _, _, err := parseSchedule(s.Spec, p.TimeZone); err != nil {
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

// validateSchedules checks Config.Schedules.
func (c *Client) validateSchedules() ([]driver.ScheduleParams, error) {
	seen := map[string]bool{}
	var out []driver.ScheduleParams
	for i, s := range c.cfg.Schedules {
		p, err := s.params()
		if err != nil {
			return nil, fmt.Errorf("Config.Schedules[%d]: %w", i, err)
		}
		if len(p.Payload) > c.cfg.MaxPayloadBytes {
			return nil, fmt.Errorf("Config.Schedules[%d]: schedule %q: %w: %d bytes, the limit is %d", i, s.Name, ErrPayloadTooLarge, len(p.Payload), c.cfg.MaxPayloadBytes)
		}
		if seen[s.Name] {
			return nil, invalid("Config.Schedules[%d]: schedule name %q used twice", i, s.Name)
		}
		seen[s.Name] = true
		out = append(out, p)
	}
	return out, nil
}

// storeSchedules writes the configured schedules (Start does).
func (c *Client) storeSchedules(ctx context.Context) error {
	if len(c.schedules) == 0 {
		return nil
	}
	now := c.cfg.Now()
	ps := make([]driver.ScheduleParams, len(c.schedules))
	for i, p := range c.schedules {
		p.Now = now
		ps[i] = p
	}
	if err := c.drv.UpsertSchedules(ctx, ps); err != nil {
		return fmt.Errorf("keel: store the configured schedules: %w", unavailable(ctx, err))
	}
	return nil
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
	row, err := c.getSchedule(ctx, name)
	if err != nil {
		return nil, err
	}
	return scheduleInfo(row, c.cfg.Now()), nil
}

func (c *Client) getSchedule(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	if !driver.ValidScheduleName(name) {
		return nil, invalid("invalid schedule name %q", name)
	}
	row, err := c.drv.GetSchedule(ctx, name)
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
	return c.pauseSchedule(ctx, name, true)
}

// ResumeSchedule resumes a paused schedule. The ticks of the paused period
// never run, whatever its missed policy: the next tick after the resume
// is the first. ErrNotFound for an unknown name.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return c.pauseSchedule(ctx, name, false)
}

func (c *Client) pauseSchedule(ctx context.Context, name string, paused bool) (*ScheduleInfo, error) {
	if !driver.ValidScheduleName(name) {
		return nil, invalid("invalid schedule name %q", name)
	}
	now := c.cfg.Now()
	row, err := c.drv.PauseSchedule(ctx, driver.PauseScheduleParams{Name: name, Paused: paused, Now: now})
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
	row, err := c.getSchedule(ctx, name)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	key := fmt.Sprintf("%s%s:manual:%d", scheduleKeyPrefix, row.Name, now.UnixNano())
	p, err := c.scheduleTask(ctx, row, key, map[string]string{metaSchedule: row.Name, metaTrigger: "manual"}, now)
	if err != nil {
		return nil, err
	}
	res, err := c.drv.Insert(ctx, []driver.InsertParams{*p})
	if err != nil {
		return nil, fmt.Errorf("keel: trigger schedule %s: %w", row.Name, unavailable(ctx, err))
	}
	if !res[0].Duplicate {
		c.wrote(res[0].Task)
	}
	if c.obs.active() {
		t := res[0].Task
		c.obs.emit(Event{Kind: EventEnqueued, TaskID: t.ID, Queue: t.Queue, Type: t.Type, Duplicate: res[0].Duplicate,
			State: t.State, Schedule: row.Name})
	}
	info := infoFromRow(res[0].Task)
	info.Duplicate = res[0].Duplicate
	return info, nil
}

// scheduleKeyPrefix begins the idempotency keys of schedules' tasks;
// users' keys cannot.
const scheduleKeyPrefix = "keel.schedule:"

// The meta keys of a schedule's tasks.
const (
	metaSchedule = "keel.schedule"
	metaTick     = "keel.tick"
	metaTrigger  = "keel.trigger"
)

// scheduleTask builds the insert of one task of schedule s. Its type may
// be one this client does not know: the stored declaration's defaults
// (max attempts, timeout) apply, as for keel serve's enqueues.
func (c *Client) scheduleTask(ctx context.Context, s *driver.ScheduleRow, key string, meta map[string]string, now time.Time) (*driver.InsertParams, error) {
	var stored map[string]*driver.TypeDefaults
	if o, known := c.types[s.Type]; !known || !o.declared() {
		var err error
		if stored, err = c.storedDefaults(ctx, []string{s.Type}); err != nil {
			return nil, err
		}
	}
	p, err := c.prepareTask(TaskSpec{Type: s.Type, Payload: json.RawMessage(s.Payload), Options: []Option{
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
		LastTick: r.LastTick, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	sched, loc, err := parseSchedule(r.Spec, r.TimeZone)
	if err != nil {
		info.Error = err.Error()
		return info
	}
	info.LastTick = r.LastTick.In(loc)
	if next := sched.Next(r.LastTick); !next.IsZero() && !next.After(now) && !r.Paused {
		info.Due = true
	}
	if r.Paused {
		return info // no next run until resumed, which restarts the count
	}
	if next := nextAfter(sched, r.LastTick, now); !next.IsZero() {
		info.NextRun = next.In(loc)
	}
	return info
}
