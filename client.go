package keel

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/catalog"
	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/declare"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/estimator"
	"github.com/keelq/keel/internal/ramp"
	"github.com/keelq/keel/internal/redisgate"
	"github.com/keelq/keel/internal/scheduler"
	"github.com/keelq/keel/internal/tracing"
)

// Client enqueues and inspects tasks and, when it has handlers, runs
// workers (Start, Stop). It is safe for concurrent use.
type Client struct {
	cfg   Config
	drv   driver.Driver
	types map[string]options    // known types and their defaults
	prep  *enqueue.Preparer     // checks tasks and makes their inserts; reads types
	enq   *enqueue.Inserter     // runs the enqueues with prep, decl, trace and gate
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
		o := h.defaults
		o.OnDeadHook = cfg.OnDead != nil && h.run != nil
		c.types[t] = o
	}
	c.prep = &enqueue.Preparer{Types: c.types, MaxAttempts: cfg.MaxAttempts, Timeout: cfg.Timeout,
		MaxPayloadBytes: cfg.MaxPayloadBytes, AnyType: cfg.AnyType}
	c.decl = declare.New(declare.Config{Store: c.drv, Types: enqueue.DeclaredTypes(c.types), MaxAge: cfg.SettingsInterval,
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
	if c.schedules, err = enqueue.CheckSchedules(conv.Slice(cfg.Schedules, Schedule.definition), cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	c.sched, c.ramps = newScheduler(c), newRampJudge(c)
	c.enq = &enqueue.Inserter{Prep: c.prep, Decl: c.decl, Tracer: c.trace, Now: cfg.Now, Wrap: unavailable,
		Wrote: func(row *driver.TaskRow) { c.eng.Load().Wrote(row) }}
	if cfg.RedisGate != nil {
		if c.gate, err = redisgate.Open(redisgate.Settings(*cfg.RedisGate), c.drv, cfg.Logger); err != nil {
			return nil, err
		}
		c.enq.Gate = c.gate.Insert
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
	return c.enqueue(ctx, jobs, false, enqueue.Insert(ctx, c.drv, nil))
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction.
func (c *Client) EnqueueManyTx(ctx context.Context, tx Tx, jobs []TaskSpec) ([]*TaskInfo, error) {
	if tx == nil {
		return nil, invalid("nil transaction")
	}
	return c.enqueue(ctx, jobs, true, enqueue.Insert(ctx, c.drv, tx))
}

// enqueue validates jobs and inserts them with insert; inTx says insert
// runs in the caller's transaction (see enqueue.Inserter).
func (c *Client) enqueue(ctx context.Context, jobs []TaskSpec, inTx bool, insert enqueue.InsertFunc) ([]*TaskInfo, error) {
	results, err := c.enq.Enqueue(ctx, specs(jobs), inTx, insert)
	if err != nil {
		return nil, err
	}
	return c.enqueued(results), nil
}

// enqueued converts the results of an enqueue and tells the observers.
func (c *Client) enqueued(results []driver.InsertResult) []*TaskInfo {
	infos := make([]*TaskInfo, len(results))
	for i, r := range results {
		infos[i] = infoFromRow(r.Task)
		infos[i].Duplicate = r.Duplicate
		if c.obs.active() {
			c.obs.emit(Event{Kind: EventEnqueued, TaskID: r.Task.ID, Queue: r.Task.Queue, Type: r.Task.Type,
				Duplicate: r.Duplicate, State: r.Task.State})
		}
	}
	return infos
}

// specs converts tasks for internal/enqueue.
func specs(tasks []TaskSpec) []enqueue.Spec {
	out := make([]enqueue.Spec, len(tasks))
	for i, j := range tasks {
		out[i] = enqueue.Spec{Type: j.Type, Payload: j.Payload, Options: enqueue.Funcs(j.Options)}
	}
	return out
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
	if err := enqueue.CheckKey(key); err != nil {
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
	if err := enqueue.CheckList(p); err != nil {
		return nil, err
	}
	rows, err := c.drv.List(ctx, p)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return conv.Rows(rows, infoFromRow), nil
}

// Counts returns how many tasks each queue holds in each state: users'
// queues only (keel's own is in Stats.Keel).
func (c *Client) Counts(ctx context.Context) (map[string]map[State]int64, error) {
	rows, err := c.drv.Counts(ctx)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return catalog.QueueCounts(rows, IsKeelTask), nil
}
