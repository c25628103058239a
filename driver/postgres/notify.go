package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
)

// Wake-ups across processes use LISTEN/NOTIFY. Every write that makes tasks
// ready (insert, retry, rescue) sends one pg_notify per distinct queue in
// its own transaction, so the notification is delivered on commit and never
// for a rolled-back write. Each worker process listens on a dedicated
// connection, outside the pool. The channel is derived from the schema, so
// applications in different schemas do not wake each other.

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
	// listenAppPrefix starts the application_name of listener connections
	// (then the schema), so operators can find them in pg_stat_activity.
	listenAppPrefix = "keel_listener:"
)

// channelName is the notification channel of schema: "keel_" + schema, or
// a hashed form when that exceeds PostgreSQL's 63-byte identifier limit.
func channelName(schema string) string {
	ch := "keel_" + schema
	if len(ch) <= 63 {
		return ch
	}
	sum := sha256.Sum256([]byte(schema))
	return "keel_" + schema[:40] + "_" + hex.EncodeToString(sum[:8])
}

// Channel returns the LISTEN/NOTIFY channel the driver uses.
func (d *Driver) Channel() string { return channelName(d.opts.Schema) }

// notifyReady tells listeners, on commit of the transaction q runs in, that
// the pending and ready tasks among rows can be claimed: one notification
// per distinct queue. Tasks scheduled for later are left to the poll.
func (d *Driver) notifyReady(ctx context.Context, q querier, rows []*driver.TaskRow) error {
	var queues []string
	seen := map[string]bool{}
	for _, r := range rows {
		// run_at and updated_at come from the same now in every write.
		if r.State != driver.StatePending || r.RunAt.After(r.UpdatedAt) || seen[r.Queue] {
			continue
		}
		seen[r.Queue] = true
		queues = append(queues, r.Queue)
	}
	if len(queues) == 0 {
		return nil
	}
	if _, err := q.exec(ctx, notifySQL, []any{d.Channel(), queues}); err != nil {
		return fmt.Errorf("notify workers: %w", err)
	}
	return nil
}

// insertNotify is insert followed by the notification of the tasks it
// inserted, in the same transaction.
func (d *Driver) insertNotify(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out, err := d.insert(ctx, q, params)
	if err != nil {
		return nil, err
	}
	rows := make([]*driver.TaskRow, 0, len(out))
	for _, r := range out {
		if !r.Duplicate {
			rows = append(rows, r.Task)
		}
	}
	if err := d.notifyReady(ctx, q, rows); err != nil {
		return nil, err
	}
	return out, nil
}

// retryNotify runs the retry statement and notifies its task's queue in one
// transaction; it returns nil when no task was retried.
func (d *Driver) retryNotify(ctx context.Context, now time.Time, id int64) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		q := pgxQuerier{db: tx}
		var err error
		if row, err = d.one(ctx, q.byID(), d.sql.retry, d.now(now), id); err != nil || row == nil {
			return err
		}
		return d.notifyReady(ctx, q, []*driver.TaskRow{row})
	})
	if err != nil {
		return nil, err
	}
	return row, nil
}

// Listen implements driver.Notifier: it listens on the schema's channel on
// a dedicated connection (application_name "keel_listener:" + schema) made
// from the pool's configuration, and reconnects after 100ms, doubling up to
// 5s while failures continue.
func (d *Driver) Listen(ctx context.Context, p driver.ListenParams) error {
	if p.Wake == nil {
		return errors.New("postgres: listen: Wake is required")
	}
	wait := listenBackoffMin
	for {
		listened, err := d.listenOnce(ctx, p.Wake)
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			wait = listenBackoffMin
		}
		if p.Error != nil {
			p.Error(err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		wait = min(2*wait, listenBackoffMax)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx ends. listened reports whether LISTEN succeeded.
func (d *Driver) listenOnce(ctx context.Context, wake func(string)) (listened bool, err error) {
	cfg := d.pool.Config().ConnConfig
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = listenAppPrefix + d.opts.Schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("listen: connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closeCtx) //nolint:errcheck // nothing to do about it
		// A connection that failed closes in the background; wait, so no
		// goroutine outlives the listener (bounded by pgconn).
		<-conn.PgConn().CleanupDone()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.Channel()}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	// Anything committed while we were not listening was not heard.
	wake("")
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenPingEvery)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			wake(n.Payload)
			continue
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pingCtx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err = conn.Ping(pingCtx)
			cancel()
			if err == nil {
				continue
			}
		}
		return true, fmt.Errorf("listen: %w", err)
	}
}

var _ driver.Notifier = (*Driver)(nil)
