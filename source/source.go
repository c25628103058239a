package source

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/shorten"
	"github.com/keelq/keel/internal/sourcemap"
)

// The states a source reports (driver.SourceReport.State).
const (
	StateConnecting = "connecting" // the broker cannot be reached yet
	StateRunning    = "running"
	StatePaused     = "paused"  // its task queue or type is paused
	StateBacklog    = "backlog" // its type's backlog is over MaxBacklog
	StateWaiting    = "waiting" // the database cannot take messages: they are nacked
	StateStopped    = "stopped"
)

// Source consumes one broker queue or JetStream consumer into tasks of one
// type. For each batch of messages it stores the tasks (and the rejected
// messages) in one commit, and only then acknowledges them: a message is
// never acknowledged before what it became is durable. A redelivered
// message finds its task through UniqueBy and is acknowledged as a
// duplicate.
type Source struct {
	c     *keel.Client
	cfg   Config
	store driver.SourceStore
	log   *slog.Logger
	dial  func(ctx context.Context) (conn, error)
	m     *metrics

	accepted, duplicate, rejected, nacked atomic.Int64
	// The type's backlog between checks: the pending tasks read at the
	// last check, plus the tasks this source added since (sinceCheck),
	// plus the messages in batches not yet stored (inHand). Each sum may
	// count a task twice, never miss one: see overBacklog and check.
	counted    sync.Mutex
	backlog    int64 // guarded by counted
	sinceCheck int64 // guarded by counted
	inHand     atomic.Int64

	state   atomic.Value // string
	blocked atomic.Value // string: "", StatePaused or StateBacklog
	lastErr atomic.Value // string
	acks    ackWindow
	started time.Time

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	// testBeforeAck, when set, runs after a batch committed and before it
	// is acknowledged (tests drop the connection there).
	testBeforeAck func(batch []*delivery)
	// testDial, when set, opens RabbitMQ's TCP connections.
	testDial testDialFunc
}

// New checks cfg and returns a source that consumes into c once started.
// The client's driver must keep sources (every keel driver does).
func New(c *keel.Client, cfg Config) (*Source, error) {
	if c == nil {
		return nil, errors.New("source: nil keel.Client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", keel.ErrInvalid, err)
	}
	cfg = cfg.withDefaults()
	store, ok := c.Driver().(driver.SourceStore)
	if !ok {
		return nil, fmt.Errorf("source %q: the driver keeps no sources", cfg.Name)
	}
	if cfg.Node == "" {
		cfg.Node = c.Node()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Source{c: c, cfg: cfg, store: store, log: cfg.Logger.With("source", cfg.Name)}
	switch cfg.Kind {
	case KindRabbitMQ:
		s.dial = s.dialRabbitMQ
	case KindNATS:
		s.dial = s.dialNATS
	}
	m, err := newMetrics(cfg.Name, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.state.Store(StateConnecting)
	s.blocked.Store("")
	s.lastErr.Store("")
	return s, nil
}

// Name is the source's name.
func (s *Source) Name() string { return s.cfg.Name }

// Config is the source's configuration, defaults filled in.
func (s *Source) Config() Config { return s.cfg }

// Start starts consuming in the background and returns at once; the
// source connects (and reconnects) on its own. Stop ends it.
func (s *Source) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return fmt.Errorf("source %q: already started", s.cfg.Name)
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	s.started = s.cfg.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.consume(ctx) }()
	go func() { defer wg.Done(); s.watch(ctx) }()
	go func() { wg.Wait(); close(s.done) }()
	return nil
}

// Stop stops consuming: the batch in hand is finished (stored and
// acknowledged) or handed back to the broker, the connection is closed and
// a last report marks the source stopped. It waits until then or until
// ctx ends.
func (s *Source) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("source %q: stop: %w", s.cfg.Name, ctx.Err())
	}
	s.state.Store(StateStopped)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer rcancel()
	if err := s.report(rctx); err != nil {
		s.log.Warn("source: last report", "err", err)
	}
	return nil
}

// Stats are a source's counters since it started.
type Stats struct {
	State                                 string
	LastError                             string
	Accepted, Duplicate, Rejected, Nacked int64
	AckP50, AckP99                        time.Duration
}

// Stats returns the source's counters.
func (s *Source) Stats() Stats {
	p50, p99 := s.acks.quantiles()
	return Stats{State: s.currentState(), LastError: s.lastErr.Load().(string),
		Accepted: s.accepted.Load(), Duplicate: s.duplicate.Load(), Rejected: s.rejected.Load(), Nacked: s.nacked.Load(),
		AckP50: p50, AckP99: p99}
}

// currentState is the state to report: a pause or backlog bound wins over
// running.
func (s *Source) currentState() string {
	st := s.state.Load().(string)
	if b := s.blocked.Load().(string); b != "" && st == StateRunning {
		return b
	}
	if st == StateRunning && s.overBacklog() {
		return StateBacklog
	}
	return st
}

// consume connects, consumes until the connection fails, and connects
// again after a growing wait, until ctx ends.
func (s *Source) consume(ctx context.Context) {
	wait := s.cfg.Reconnect
	for ctx.Err() == nil {
		cn, err := s.dial(ctx)
		if err != nil {
			s.state.Store(StateConnecting)
			s.setErr(fmt.Errorf("connect: %w", err))
			s.log.Warn("source: connect", "err", err, "retry_in", wait)
			sleep(ctx, wait)
			wait = min(2*wait, 30*time.Second)
			continue
		}
		wait = s.cfg.Reconnect
		s.state.Store(StateRunning)
		err = s.serve(ctx, cn)
		cn.close()
		if ctx.Err() != nil {
			return
		}
		s.state.Store(StateConnecting)
		s.setErr(err)
		s.log.Warn("source: connection lost", "err", err)
		sleep(ctx, s.cfg.Reconnect)
	}
}

// serve moves batches from cn into tasks until cn fails or ctx ends.
func (s *Source) serve(ctx context.Context, cn conn) error {
	var wg sync.WaitGroup
	defer wg.Wait() // the batches in flight end before the connection closes
	slots := make(chan struct{}, s.cfg.Inflight)
	failed := make(chan error, 1)
	for {
		if err := s.waitUnblocked(ctx); err != nil {
			return nil
		}
		select {
		case slots <- struct{}{}:
		case err := <-failed:
			return err
		case <-ctx.Done():
			return nil
		}
		// A batch that failed frees its slot after saying so, and select
		// picks among ready cases at random: look again, so that no new
		// batch is stored on a connection that cannot acknowledge it.
		if err := failedYet(failed); err != nil {
			return err
		}
		batch, err := collect(ctx, cn.deliveries(), s.cfg.Batch, s.cfg.Linger)
		if ferr := failedYet(failed); ferr != nil {
			// The connection failed while this batch was collected: it is
			// not stored, and the broker delivers it again.
			return ferr
		}
		if len(batch) > 0 {
			s.inHand.Add(int64(len(batch)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				defer s.inHand.Add(-int64(len(batch)))
				if herr := s.handle(ctx, cn, batch); herr != nil {
					select {
					case failed <- herr:
					default:
					}
				}
			}()
		} else {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if cerr := cn.err(); cerr != nil {
				return cerr
			}
			return err
		}
	}
}

// failedYet returns the error a batch reported on failed, if any.
func failedYet(failed <-chan error) error {
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

// waitUnblocked waits while the source's queue or type is paused or its
// backlog is over the bound.
func (s *Source) waitUnblocked(ctx context.Context) error {
	for s.blocked.Load().(string) != "" || s.overBacklog() {
		if !sleep(ctx, min(s.cfg.Check, 100*time.Millisecond)) {
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// overBacklog tells whether the tasks this source added since the last
// check took the type's backlog over MaxBacklog.
func (s *Source) overBacklog() bool {
	if s.cfg.MaxBacklog < 0 {
		return false
	}
	// inHand first: a batch leaves it only after joining sinceCheck, so
	// a batch finishing between the two reads is counted twice, not missed.
	n := s.inHand.Load()
	s.counted.Lock()
	n += s.backlog + s.sinceCheck
	s.counted.Unlock()
	return n > s.cfg.MaxBacklog
}

// collect waits for a first delivery, then takes more until max or until
// linger passed.
func collect(ctx context.Context, in <-chan *delivery, max int, linger time.Duration) ([]*delivery, error) {
	var batch []*delivery
	select {
	case d, ok := <-in:
		if !ok {
			return nil, errClosed
		}
		batch = append(batch, d)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	timer := time.NewTimer(linger)
	defer timer.Stop()
	for len(batch) < max {
		select {
		case d, ok := <-in:
			if !ok {
				return batch, errClosed
			}
			batch = append(batch, d)
		case <-timer.C:
			return batch, nil
		case <-ctx.Done():
			return batch, nil // the batch in hand is still finished
		}
	}
	return batch, nil
}

var errClosed = errors.New("the broker closed the delivery stream")

// handle stores one batch and acknowledges it, or hands it back to the
// broker when the database cannot take it. An error means the connection
// failed (the broker will redeliver what was not acknowledged).
func (s *Source) handle(ctx context.Context, cn conn, batch []*delivery) error {
	// The batch in hand is finished even when Stop was called meanwhile.
	wctx := context.WithoutCancel(ctx)
	var specs []keel.TaskSpec
	var specOf []*delivery
	var rejects []driver.RejectedParams
	for _, d := range batch {
		key, err := sourcemap.Message(s.cfg.Key, d.body, s.cfg.MaxBody, sourcemap.Headers(d.headers, d.messageID))
		if err != nil {
			rejects = append(rejects, s.rejection(d, sourcemap.Reason(err)))
			continue
		}
		specs = append(specs, s.spec(d, key))
		specOf = append(specOf, d)
	}
	accepted, duplicate, more, err := s.enqueue(wctx, specs, specOf)
	rejects = append(rejects, more...)
	if err == nil && len(rejects) > 0 {
		_, err = s.store.InsertRejected(wctx, rejects)
		if err != nil {
			err = fmt.Errorf("store rejected messages: %w", err)
		}
	}
	if err != nil {
		return s.handBack(ctx, cn, batch, err)
	}
	if s.testBeforeAck != nil {
		s.testBeforeAck(batch)
	}
	if err := cn.ack(batch); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	now := time.Now()
	for _, d := range batch {
		s.acks.add(now.Sub(d.received))
		s.m.ack.Observe(now.Sub(d.received).Seconds())
	}
	s.counted.Lock()
	s.sinceCheck += accepted
	s.counted.Unlock()
	s.count(accepted, duplicate, int64(len(rejects)))
	if s.state.Load().(string) == StateWaiting {
		s.state.Store(StateRunning)
	}
	return nil
}

// enqueue stores specs in one transaction. When the batch holds a task
// the client refuses as bad input, each is enqueued alone and the refused
// ones come back as rejections. err is set when the database could not
// take the batch (or the type is unknown: a configuration error): then
// nothing may be acknowledged.
func (s *Source) enqueue(ctx context.Context, specs []keel.TaskSpec, of []*delivery) (accepted, duplicate int64, rejects []driver.RejectedParams, err error) {
	if len(specs) == 0 {
		return 0, 0, nil, nil
	}
	infos, err := s.c.EnqueueMany(ctx, specs)
	if err == nil {
		for _, t := range infos {
			if t.Duplicate {
				duplicate++
			} else {
				accepted++
			}
		}
		return accepted, duplicate, nil, nil
	}
	if !badInput(err) {
		return 0, 0, nil, err
	}
	for i, spec := range specs {
		t, err := s.c.EnqueueMany(ctx, []keel.TaskSpec{spec})
		switch {
		case err == nil && t[0].Duplicate:
			duplicate++
		case err == nil:
			accepted++
		case badInput(err):
			rejects = append(rejects, s.rejection(of[i], err.Error()))
		default:
			return 0, 0, nil, err
		}
	}
	return accepted, duplicate, rejects, nil
}

// badInput tells a task the client refuses for its content (stored as a
// rejection) from a failure that may pass (the message is handed back).
func badInput(err error) bool {
	return (errors.Is(err, keel.ErrInvalid) || errors.Is(err, keel.ErrPayloadTooLarge)) && !errors.Is(err, keel.ErrUnknownType)
}

// handBack nacks the batch after NackDelay (sooner when the source
// stops), so that the broker redelivers it once the database is back.
func (s *Source) handBack(ctx context.Context, cn conn, batch []*delivery, cause error) error {
	s.state.Store(StateWaiting)
	s.setErr(cause)
	s.log.Warn("source: the database did not take the batch; handing it back to the broker",
		"messages", len(batch), "err", cause, "retry_in", s.cfg.NackDelay)
	sleep(ctx, s.cfg.NackDelay)
	if err := cn.nack(batch, s.cfg.NackDelay); err != nil {
		return fmt.Errorf("nack: %w", err)
	}
	s.nacked.Add(int64(len(batch)))
	s.m.messages.WithLabelValues("nacked").Add(float64(len(batch)))
	return nil
}

func (s *Source) count(accepted, duplicate, rejected int64) {
	s.accepted.Add(accepted)
	s.duplicate.Add(duplicate)
	s.rejected.Add(rejected)
	s.m.messages.WithLabelValues("accepted").Add(float64(accepted))
	s.m.messages.WithLabelValues("duplicate").Add(float64(duplicate))
	s.m.messages.WithLabelValues("rejected").Add(float64(rejected))
}

// spec is the task a message becomes.
func (s *Source) spec(d *delivery, key string) keel.TaskSpec {
	opts := []keel.Option{keel.UniqueBy(key)}
	if s.cfg.TaskQueue != "" {
		opts = append(opts, keel.Queue(s.cfg.TaskQueue))
	}
	return keel.TaskSpec{Type: s.cfg.Type, Payload: json.RawMessage(d.body), Options: opts}
}

// rejection is the stored form of a message that cannot become a task.
func (s *Source) rejection(d *delivery, reason string) driver.RejectedParams {
	body := d.body
	if len(body) > driver.MaxRejectedBody {
		body = body[:driver.MaxRejectedBody]
	}
	h := d.headers
	if _, ok := sourcemap.Headers(h, "")("message-id"); d.messageID != "" && !ok {
		// Kept with the headers, so that a resubmit finds it.
		h = maps.Clone(h)
		if h == nil {
			h = map[string][]string{}
		}
		h["message-id"] = []string{d.messageID}
	}
	headers, err := json.Marshal(h)
	if err != nil || h == nil {
		headers = []byte("{}")
	}
	if len(headers) > driver.MaxRejectedHeaders {
		headers = fmt.Appendf(nil, `{"keel-note":["headers of %d bytes not kept: over %d"]}`, len(headers), driver.MaxRejectedHeaders)
	}
	sum := sha256.Sum256(d.body)
	return driver.RejectedParams{Source: s.cfg.Name, Type: s.cfg.Type, Queue: s.cfg.TaskQueue, Key: s.cfg.Key,
		Reason: cut(reason, driver.MaxRejectedReason), Body: body, Size: int64(len(d.body)), Headers: headers, Digest: sum[:], ReceivedAt: d.received}
}

func (s *Source) setErr(err error) {
	if err != nil {
		s.lastErr.Store(cut(err.Error(), driver.MaxSourceError))
	}
}

// cut makes text storable: valid UTF-8 without NUL, at most n bytes
// (n well above 3).
func cut(text string, n int) string {
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "")
	if len(text) <= n {
		return text
	}
	return shorten.String(text, n-len("…"))
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
