package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel/driver"
)

// Every Listen on a driver shares one listening session: one connection
// acquired from the driver's pool, so it obeys the pool's configuration
// (MaxConns, TLS, AfterConnect, ...), held while any Listen runs and handed
// back when the last one ends. Notifications are written in notify.go.

const (
	// listenBackoffMin and listenBackoffMax bound the wait before the
	// listener reconnects; it doubles on each failure in a row.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenPingEvery is how long the listener waits for a notification
	// before it checks that its connection is still alive: a silently
	// dropped connection would otherwise wait forever.
	listenPingEvery   = 30 * time.Second
	listenPingTimeout = 5 * time.Second
	// listenAppPrefix starts the application_name of the listening
	// connection while it listens (then the schema), so operators can find
	// it in pg_stat_activity.
	listenAppPrefix = "keel_listener:"
)

// ErrPoolTooSmall is reported to ListenParams.Error when the driver's pool
// has a single connection (MaxConns 1): holding it for LISTEN would stall
// every other query, so the driver does not listen. Writes through the
// driver still wake its own listeners at once; tasks committed by other
// processes, or in the caller's transactions, wait for the poll.
var ErrPoolTooSmall = errors.New("postgres: listen: the pool has MaxConns 1 and cannot spare a connection for LISTEN; " +
	"tasks from other processes and transactions are found by polling (set pool_max_conns to 2 or more)")

// wakeHub is a driver's wake-up side in this process: the Listen calls
// running, the session they share and the token that marks notifications
// of the driver's own writes.
type wakeHub struct {
	token string // see newToken
	// mu guards the fields below. It is held while Wake and Error are
	// called, so that neither is called after its Listen returned.
	mu      sync.Mutex
	subs    map[*driver.ListenParams]struct{}
	session *listenSession // nil when no Listen runs, or after Close
	closed  bool
}

// listenSession is the goroutine that holds the listening connection.
type listenSession struct {
	cancel    context.CancelFunc
	done      chan struct{}
	listening bool // LISTEN is in effect; guarded by wakeHub.mu
}

func (s *listenSession) stop() {
	s.cancel()
	<-s.done
}

// Listen implements driver.Notifier. All Listen calls on a driver share one
// connection acquired from the driver's pool and held while any of them
// runs (application_name "keel_listener:" + schema meanwhile); after a
// failure it reconnects after 100ms, doubling up to 5s while failures
// continue, and after the pool's MaxConnLifetime it hands the connection
// back and takes another. A write through this driver (Insert, Retry,
// RetryMatching, Rescue) wakes every Listen of the driver directly once it
// committed, and its notification is skipped; other notifications wake
// every Listen. On a pool of MaxConns 1 Listen does not listen: it reports
// ErrPoolTooSmall to params.Error once, calls Wake("") and is woken by the
// driver's own writes only.
func (d *Driver) Listen(ctx context.Context, params driver.ListenParams) error {
	if params.Wake == nil {
		return errors.New("postgres: listen: Wake is required")
	}
	p := &params
	h := &d.wakes
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errors.New("postgres: listen: driver closed")
	}
	if h.subs == nil {
		h.subs = map[*driver.ListenParams]struct{}{}
	}
	h.subs[p] = struct{}{}
	switch {
	case h.session != nil:
		if h.session.listening {
			p.Wake("") // it may have missed what was sent before it joined
		}
	case d.pool.Config().MaxConns < 2:
		if p.Error != nil {
			p.Error(ErrPoolTooSmall)
		}
		p.Wake("") // the driver's writes from now on wake it; earlier ones did not
	default:
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		h.session = &listenSession{cancel: cancel, done: make(chan struct{})}
		go d.listenLoop(sctx, h.session)
	}
	h.mu.Unlock()

	<-ctx.Done()
	h.mu.Lock()
	delete(h.subs, p)
	var last *listenSession
	if len(h.subs) == 0 {
		last, h.session = h.session, nil
	}
	h.mu.Unlock()
	if last != nil {
		last.stop()
	}
	return nil
}

// stopListening ends the listening session for good (Close).
func (d *Driver) stopListening() {
	h := &d.wakes
	h.mu.Lock()
	h.closed = true
	s := h.session
	h.session = nil
	h.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// wakeLocal wakes every Listen of this driver for each of queues: called
// after the commit of a write the driver made itself.
func (d *Driver) wakeLocal(queues []string) {
	if len(queues) == 0 {
		return
	}
	h := &d.wakes
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.subs {
		for _, q := range queues {
			p.Wake(q)
		}
	}
}

// deliver wakes every Listen for queue, if s is still the current session.
func (d *Driver) deliver(s *listenSession, queue string) {
	h := &d.wakes
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.session != s {
		return
	}
	for p := range h.subs {
		p.Wake(queue)
	}
}

// sessionState records that s listens (err nil: every Listen is woken for
// every queue, since anything committed while it was not listening was not
// heard) or failed with err (reported to every Listen).
func (d *Driver) sessionState(s *listenSession, err error) {
	h := &d.wakes
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.session != s {
		return
	}
	s.listening = err == nil
	for p := range h.subs {
		switch {
		case err == nil:
			p.Wake("")
		case p.Error != nil:
			p.Error(err)
		}
	}
}

// listenLoop runs session s until ctx ends.
func (d *Driver) listenLoop(ctx context.Context, s *listenSession) {
	defer close(s.done)
	lifetime := d.pool.Config().MaxConnLifetime
	wait := listenBackoffMin
	for {
		listened, err := d.listenOnce(ctx, s, lifetime)
		if ctx.Err() != nil {
			return
		}
		if listened {
			wait = listenBackoffMin
		}
		if err == nil {
			continue // the connection reached its lifetime: take another now
		}
		d.sessionState(s, err)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		wait = min(2*wait, listenBackoffMax)
	}
}

// listenOnce acquires a connection, listens and delivers notifications
// until the connection fails, it has been held for lifetime (if positive;
// err is then nil) or ctx ends. listened reports whether LISTEN succeeded.
func (d *Driver) listenOnce(ctx context.Context, s *listenSession, lifetime time.Duration) (listened bool, err error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("listen: acquire a connection: %w", unavailable(ctx, err))
	}
	defer releaseListener(conn)
	var until time.Time
	if lifetime > 0 {
		until = time.Now().Add(lifetime)
	}
	if _, err := conn.Exec(ctx, `SELECT set_config('application_name', $1, false)`, listenAppPrefix+d.opts.Schema); err != nil {
		return false, fmt.Errorf("listen: name the connection: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.Channel()}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	d.sessionState(s, nil)
	c := conn.Conn()
	for {
		wait := listenPingEvery
		if !until.IsZero() {
			if wait = min(wait, time.Until(until)); wait <= 0 {
				return true, nil
			}
		}
		waitCtx, cancel := context.WithTimeout(ctx, wait)
		n, err := c.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			if queue, own := d.payloadQueue(n.Payload); !own {
				d.deliver(s, queue)
			}
			continue
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !c.IsClosed():
			if !until.IsZero() && !time.Now().Before(until) {
				return true, nil
			}
			pingCtx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err = c.Ping(pingCtx)
			cancel()
			if err == nil {
				continue
			}
		}
		return true, fmt.Errorf("listen: %w", err)
	}
}

// releaseListener stops listening on conn and hands it back to the pool
// as it was acquired; the pool drops a connection that failed, or that
// cannot be cleaned.
func releaseListener(conn *pgxpool.Conn) {
	defer conn.Release()
	c := conn.Conn()
	if c.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), listenPingTimeout)
	defer cancel()
	if _, err := c.Exec(ctx, "UNLISTEN *; RESET application_name"); err != nil {
		c.Close(ctx) //nolint:errcheck // the pool drops it either way
		return
	}
	// Notifications that arrived before UNLISTEN are buffered in the
	// connection: drop them, so its next user does not receive them.
	ended, end := context.WithCancel(context.Background())
	end()
	for {
		if n, _ := c.WaitForNotification(ended); n == nil {
			return
		}
	}
}

var _ driver.Notifier = (*Driver)(nil)
