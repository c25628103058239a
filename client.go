package keel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/declare"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/estimator"
	"github.com/keelq/keel/internal/ramp"
	"github.com/keelq/keel/internal/redisgate"
	"github.com/keelq/keel/internal/scheduler"
	"github.com/keelq/keel/internal/shorten"
	"github.com/keelq/keel/internal/tracing"
)

// Client enqueues and inspects tasks and, when it has handlers, runs
// workers (Start, Stop). It is safe for concurrent use.
type Client struct {
	cfg   Config
	drv   driver.Driver
	types map[string]options    // known types and their defaults
	decl  *declare.Declarations // stored type defaults: ours written, others' read
	trace trace.Tracer          // from Config.TracerProvider

	mu  sync.Mutex                    // held by Start
	eng atomic.Pointer[engine.Engine] // set by Start; nil before (its methods then do nothing)

	snaps *estimator.Reader    // Stats, ETA and alerts read through it; it keeps the last for ETA
	eta   *estimator.Estimator // the ETA model: Estimate and EstimateMany delegate to it

	alerter *alerts.Alerter // alert evaluation and delivery

	obs observers // told about task events (Observe)

	schedules []driver.ScheduleParams // Config.Schedules, validated
	sched     *scheduler.Scheduler    // enqueues the schedules' ticks
	ramps     *ramp.Judge             // advances the ramps

	gate *redisgate.Gate // Config.RedisGate; nil without
}

// NewClient validates cfg and returns a client. It does not start workers.
func NewClient(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, drv: cfg.Driver, types: map[string]options{},
		trace: cfg.TracerProvider.Tracer(tracing.TracerName)}
	for _, t := range cfg.Types {
		c.types[t] = options{}
	}
	for t, h := range cfg.Handlers.m {
		c.types[t] = h.defaults
		if cfg.OnDead != nil && h.run != nil {
			o := h.defaults
			o.onDeadHook = true
			c.types[t] = o
		}
	}
	c.decl = declare.New(declare.Config{Store: c.drv, Types: declaredTypes(c.types), MaxAge: cfg.SettingsInterval,
		Now: cfg.Now, Logger: cfg.Logger})
	c.snaps = &estimator.Reader{Store: c.drv, Now: c.cfg.Now, Wrap: unavailable, Workers: func() map[string]int {
		w := make(map[string]int, len(c.cfg.Queues))
		for q := range c.cfg.Queues {
			w[q] = c.workers(q)
		}
		return w
	}}
	c.alerter = newAlerter(c)
	c.eta = estimator.New(estimator.Config{Snapshots: c.snaps, Store: c.drv, Now: c.cfg.Now, LiveWindow: c.cfg.liveWindow(), Wrap: unavailable})
	var err error
	if c.schedules, err = validateSchedules(cfg.Schedules, cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	c.sched, c.ramps = newScheduler(c), newRampJudge(c)
	if cfg.RedisGate != nil {
		if c.gate, err = newGate(*cfg.RedisGate, c.drv, cfg.Logger); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Driver returns the client's storage driver.
func (c *Client) Driver() driver.Driver { return c.drv }

// Node returns this process's node name.
func (c *Client) Node() string { return c.cfg.Node }

// TaskSpec describes one task for EnqueueMany: its type, payload and options,
// as Enqueue takes them.
type TaskSpec struct {
	Type    string
	Payload any
	Options []Option
}

// Enqueue durably stores a task of taskType. payload is encoded as JSON
// ([]byte and json.RawMessage must already be JSON); a nil payload is
// stored as {}. A payload some database could not store as given is
// refused: invalid UTF-8, the NUL character \u0000, a lone UTF-16
// surrogate, an object key given twice, or a number with more than 131072
// digits before or 16383 after the decimal point. When an idempotency
// key (UniqueBy, IdempotencyKey) matches a task that holds it, that task is
// returned with Duplicate set and nothing is inserted. Bad input returns an
// error wrapping ErrInvalid, ErrUnknownType or ErrPayloadTooLarge and
// writes nothing. A database that cannot be reached returns an error
// wrapping ErrUnavailable.
func (c *Client) Enqueue(ctx context.Context, taskType string, payload any, opts ...Option) (*TaskInfo, error) {
	infos, err := c.EnqueueMany(ctx, []TaskSpec{{Type: taskType, Payload: payload, Options: opts}})
	if err != nil {
		return nil, err
	}
	return infos[0], nil
}

// Tx is a caller's transaction: a *sql.Tx (for SQLite, begun on the
// driver's DB()), or a driver's native one such as pgx.Tx for PostgreSQL.
type Tx = driver.Tx

// EnqueueTx is Enqueue inside the caller's transaction: the task exists if
// and only if tx commits. For SQLite, begin tx on the driver's DB().
func (c *Client) EnqueueTx(ctx context.Context, tx Tx, taskType string, payload any, opts ...Option) (*TaskInfo, error) {
	infos, err := c.EnqueueManyTx(ctx, tx, []TaskSpec{{Type: taskType, Payload: payload, Options: opts}})
	if err != nil {
		return nil, err
	}
	return infos[0], nil
}

// EnqueueMany stores many tasks in one transaction: all of them or, on any
// error, none.
func (c *Client) EnqueueMany(ctx context.Context, jobs []TaskSpec) ([]*TaskInfo, error) {
	return c.enqueue(ctx, jobs, false, func(params []driver.InsertParams) ([]driver.InsertResult, error) {
		return c.drv.Insert(ctx, params)
	})
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction.
func (c *Client) EnqueueManyTx(ctx context.Context, tx Tx, jobs []TaskSpec) ([]*TaskInfo, error) {
	if tx == nil {
		return nil, invalid("nil transaction")
	}
	return c.enqueue(ctx, jobs, true, func(params []driver.InsertParams) ([]driver.InsertResult, error) {
		return c.drv.InsertTx(ctx, tx, params)
	})
}

// enqueue validates jobs and inserts them with insert. inTx says insert
// runs in the caller's transaction: this client's type declarations are
// then stored in the background rather than before the insert.
func (c *Client) enqueue(ctx context.Context, jobs []TaskSpec, inTx bool, insert func([]driver.InsertParams) ([]driver.InsertResult, error)) ([]*TaskInfo, error) {
	if len(jobs) == 0 {
		return nil, invalid("no tasks to enqueue")
	}
	if inTx {
		c.decl.DeclareLater(ctx)
	} else if err := c.decl.Declare(ctx); err != nil {
		return nil, err
	}
	stored, err := c.decl.Stored(ctx, c.undeclared(jobs))
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	params := make([]driver.InsertParams, len(jobs))
	for i, j := range jobs {
		p, err := c.prepare(j, now, stored)
		if err != nil {
			if len(jobs) > 1 {
				return nil, fmt.Errorf("task %d: %w", i, err)
			}
			return nil, err
		}
		params[i] = p
	}
	spans, err := tracing.StartEnqueue(ctx, c.trace, params)
	if err != nil {
		return nil, err
	}
	var results []driver.InsertResult
	if c.gate != nil && !inTx && len(params) == 1 && params[0].IdemKey != "" {
		results, err = c.gate.Insert(ctx, params[0], insert)
	} else {
		results, err = insert(params)
	}
	if err != nil {
		err = fmt.Errorf("enqueue: %w", unavailable(ctx, err))
		for _, s := range spans {
			s.RecordError(err)
			s.SetStatus(codes.Error, err.Error())
			s.End()
		}
		return nil, err
	}
	infos := make([]*TaskInfo, len(results))
	for i, r := range results {
		infos[i] = infoFromRow(r.Task)
		infos[i].Duplicate = r.Duplicate
		if !r.Duplicate {
			c.eng.Load().Wrote(r.Task)
		}
		if spans[i].IsRecording() {
			spans[i].SetAttributes(tracing.AttrTaskID.Int64(r.Task.ID), tracing.AttrDuplicate.Bool(r.Duplicate))
		}
		spans[i].End()
		if c.obs.active() {
			c.obs.emit(Event{Kind: EventEnqueued, TaskID: r.Task.ID, Queue: r.Task.Queue, Type: r.Task.Type,
				Duplicate: r.Duplicate, State: r.Task.State})
		}
	}
	return infos, nil
}

// undeclared returns the valid types of jobs that this client may enqueue
// but registered without defaults: their stored declarations apply.
func (c *Client) undeclared(jobs []TaskSpec) []string {
	var out []string
	for _, j := range jobs {
		o, known := c.types[j.Type]
		if ((known && !o.declared()) || (!known && c.cfg.AnyType && validName(j.Type))) && !slices.Contains(out, j.Type) {
			out = append(out, j.Type)
		}
	}
	return out
}

// prepare validates one job and turns it into insert parameters. Its
// defaults are this client's registration of the type, or when that sets
// none, the type's stored declaration (stored, from the declarations' cache).
func (c *Client) prepare(j TaskSpec, now time.Time, stored map[string]*driver.TypeDefaults) (driver.InsertParams, error) {
	if o := (options{}).merge(j.Options); o.idemKey != nil && strings.HasPrefix(*o.idemKey, scheduleKeyPrefix) {
		// A held tick key would fail the schedule's tick until released.
		return driver.InsertParams{}, invalid("idempotency key %q: keys starting with %q are reserved for schedules' ticks", *o.idemKey, scheduleKeyPrefix)
	}
	return c.prepareTask(j, now, stored, c.cfg.AnyType)
}

// prepareTask is prepare; anyType accepts a type this client neither
// handles nor declares (a schedule's task, which another process runs).
func (c *Client) prepareTask(j TaskSpec, now time.Time, stored map[string]*driver.TypeDefaults, anyType bool) (driver.InsertParams, error) {
	if !validName(j.Type) {
		return driver.InsertParams{}, invalid("invalid task type %q: use 1-128 letters, digits, '_', '.', ':' or '-'", j.Type)
	}
	if reservedType(j.Type) {
		return driver.InsertParams{}, invalid("task type %q: names starting with %q are reserved for keel's own tasks", j.Type, reservedTypePrefix)
	}
	defaults, known := c.types[j.Type]
	if !known && !anyType {
		return driver.InsertParams{}, fmt.Errorf("%w %q: register a handler or declare it in Config.Types", ErrUnknownType, j.Type)
	}
	if !defaults.declared() {
		defaults = storedOptions(stored[j.Type])
	}
	switch call := options.merge(options{}, j.Options); {
	case call.backoff != nil:
		return driver.InsertParams{}, invalid("Backoff is a per-type option: pass it to Handle, not Enqueue")
	case call.maxSnoozes != nil:
		return driver.InsertParams{}, invalid("MaxSnoozes is a per-type option: pass it to Handle, not Enqueue")
	case call.onDead != nil:
		return driver.InsertParams{}, invalid("OnDead is a per-type option: pass it to Handle or Declare, not Enqueue")
	case call.brake != nil:
		return driver.InsertParams{}, invalid("Brake is a per-type option: pass it to Handle or Declare, not Enqueue")
	}
	o := defaults.merge(j.Options)
	if err := o.validate(); err != nil {
		return driver.InsertParams{}, err
	}
	if err := checkStored(o); err != nil {
		return driver.InsertParams{}, err
	}
	raw, err := encodePayload(j.Payload, c.cfg.MaxPayloadBytes)
	if err != nil {
		return driver.InsertParams{}, err
	}
	canon, err := digest.Canonical(raw)
	if err != nil {
		return driver.InsertParams{}, invalid("%v", err)
	}
	p := driver.InsertParams{
		Queue:       DefaultQueue,
		Type:        j.Type,
		Payload:     canon,
		MaxAttempts: c.cfg.MaxAttempts,
		RunAt:       now,
		Timeout:     c.cfg.Timeout,
		Now:         now,
		// The digest covers the type too, so one explicit key reused for
		// another type is a conflict, not a duplicate.
		PayloadDigest: digest.Sum(append([]byte(j.Type+"\x00"), canon...)),
	}
	if o.queue != nil {
		p.Queue = *o.queue
	}
	if o.priority != nil {
		p.Priority = *o.priority
	}
	if o.maxAttempts != nil {
		p.MaxAttempts = *o.maxAttempts
	}
	if o.timeout != nil {
		p.Timeout = *o.timeout
	}
	if o.runAt != nil {
		p.RunAt = *o.runAt
	}
	if o.delay != nil {
		p.RunAt = now.Add(*o.delay)
		if err := checkRunAt(p.RunAt, " (now plus delay "+o.delay.String()+")"); err != nil {
			return driver.InsertParams{}, err
		}
	}
	switch {
	case o.uniqueBy != nil:
		p.IdemKey = digest.UniqueKey(j.Type, *o.uniqueBy, canon)
	case o.idemKey != nil:
		p.IdemKey = digest.ExplicitKey(*o.idemKey)
	}
	if o.meta != nil {
		if p.Meta, err = json.Marshal(o.meta); err != nil {
			return driver.InsertParams{}, invalid("meta: %v", err)
		}
	}
	return p, nil
}

// checkStored refuses option values that some database cannot store as
// given (NUL, invalid UTF-8), so every database answers alike. Names and
// keys' lengths are checked by options.validate.
func checkStored(o options) error {
	if o.idemKey != nil {
		if err := checkText("idempotency key", *o.idemKey); err != nil {
			return err
		}
	}
	for k, v := range o.meta {
		if err := checkText("meta key", k); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("meta %q", shorten.String(k, maxEcho)), v); err != nil {
			return err
		}
	}
	return nil
}

// checkText refuses a string some database cannot store: invalid UTF-8
// (stored replaced, or refused) or the NUL character (refused by
// PostgreSQL).
func checkText(what, s string) error {
	switch {
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return invalid("%s contains the NUL character (\\u0000)", what)
	}
	return nil
}

// encodePayload encodes a job's payload as JSON; nil is {}.
func encodePayload(payload any, maxBytes int) ([]byte, error) {
	var raw []byte
	switch v := payload.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case nil:
		// No payload is an empty object: a handler decodes it into its
		// struct, and an HTTP target receives a JSON object.
		raw = []byte("{}")
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, invalid("payload cannot be encoded as JSON: %v", err)
		}
		raw = b
	}
	if len(raw) > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrPayloadTooLarge, len(raw), maxBytes)
	}
	return raw, nil
}

// Get returns the task with id, or ErrNotFound. An archived task (moved
// out of the task table after its retention) is found too, with Archived
// set.
func (c *Client) Get(ctx context.Context, id int64) (*TaskInfo, error) {
	row, err := c.drv.Get(ctx, id)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return infoFromRow(row), nil
}

// GetByKey returns the task holding the idempotency key given with
// IdempotencyKey (the same key, before keel stores it namespaced): the
// pending, running or succeeded task with that key. Dead and cancelled
// tasks released their key and are not found by it, nor are archived
// ones; no holder is ErrNotFound. A UniqueBy key cannot be looked up:
// what keel stores is a digest of the type, the natural key and the
// payload, so the lookup would need the payload too. It reads one row
// through the key's unique index.
func (c *Client) GetByKey(ctx context.Context, key string) (*TaskInfo, error) {
	if key == "" || len(key) > 255 {
		return nil, invalid("idempotency key must be 1-255 bytes, got %d", len(key))
	}
	if err := checkText("idempotency key", key); err != nil {
		return nil, err
	}
	row, err := c.drv.GetByKey(ctx, digest.ExplicitKey(key))
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return infoFromRow(row), nil
}

// Cancel stops a pending or running task for good (state cancelled; a
// running handler in this process has its context cancelled, elsewhere its
// completion is rejected). Finished tasks, archived ones too, return
// ErrWrongState.
func (c *Client) Cancel(ctx context.Context, id int64) (*TaskInfo, error) {
	row, err := c.drv.Cancel(ctx, id, c.cfg.Now())
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	c.eng.Load().Cancel(id)
	c.cancelled(ctx, row)
	return infoFromRow(row), nil
}

// Retry sends a dead or cancelled task back to pending, runnable now, with
// its attempts reset and its history kept. Other states, and archived
// tasks, return ErrWrongState; if a newer task holds its idempotency key,
// ErrIdempotencyConflict.
func (c *Client) Retry(ctx context.Context, id int64) (*TaskInfo, error) {
	row, err := c.drv.Retry(ctx, id, c.cfg.Now())
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	c.eng.Load().Wrote(row)
	return infoFromRow(row), nil
}

// List returns the tasks p selects, newest first: every field of Filter
// applies; Limit defaults to 100, at most 1000; page with BeforeID.
func (c *Client) List(ctx context.Context, p Filter) ([]*TaskInfo, error) {
	if p.State != "" && !p.State.Valid() {
		return nil, invalid("unknown state %q: use pending, running, succeeded, dead or cancelled", p.State)
	}
	if p.Limit < 0 || p.Limit > 1000 {
		return nil, invalid("limit must be in 0..1000, got %d", p.Limit)
	}
	if p.IDs != nil {
		return nil, invalid("ids select tasks for RetryMatching and PurgeMatching only; use Get for one task")
	}
	if p.BeforeID < 0 || p.AfterID < 0 {
		return nil, invalid("before_id and after_id must not be negative, got %d and %d", p.BeforeID, p.AfterID)
	}
	if err := checkTimeFilters("created_after", p.CreatedAfter, "created_before", p.CreatedBefore,
		"finished_after", p.FinishedAfter, "finished_before", p.FinishedBefore); err != nil {
		return nil, err
	}
	if !p.CreatedAfter.IsZero() && !p.CreatedBefore.IsZero() && !p.CreatedAfter.Before(p.CreatedBefore) {
		return nil, invalid("created_after must be before created_before")
	}
	if !p.FinishedAfter.IsZero() && !p.FinishedBefore.IsZero() && !p.FinishedAfter.Before(p.FinishedBefore) {
		return nil, invalid("finished_after must be before finished_before")
	}
	if err := checkText("type filter", p.Type); err != nil {
		return nil, err
	}
	if err := checkText("queue filter", p.Queue); err != nil {
		return nil, err
	}
	if err := p.ValidateNames(); err != nil {
		return nil, invalid("%v", err)
	}
	rows, err := c.drv.List(ctx, p)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	out := make([]*TaskInfo, len(rows))
	for i := range rows {
		out[i] = infoFromRow(&rows[i])
	}
	return out, nil
}

// Counts returns how many tasks each queue holds in each state: users'
// queues only (keel's own is in Stats.Keel).
func (c *Client) Counts(ctx context.Context) (map[string]map[State]int64, error) {
	rows, err := c.drv.Counts(ctx)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	out := map[string]map[State]int64{}
	for _, r := range rows {
		if IsKeelTask(r.Queue, r.Type) {
			continue
		}
		if out[r.Queue] == nil {
			out[r.Queue] = map[State]int64{}
		}
		out[r.Queue][kindState(r.Kind)] += r.N
	}
	return out, nil
}

// kindState is the state a live counter's kind counts: retrying tasks are
// pending.
func kindState(kind string) State {
	if kind == driver.KindRetrying {
		return StatePending
	}
	return State(kind)
}
