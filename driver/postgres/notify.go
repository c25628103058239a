package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
)

// Wake-ups across processes use LISTEN/NOTIFY. Every write that makes tasks
// ready (insert, retry, rescue) sends one pg_notify per distinct queue in
// its own transaction, so the notification is delivered on commit and never
// for a rolled-back write. The channel is derived from the schema, so
// applications in different schemas do not wake each other.
//
// Each enqueue wakes each listening client once. A write the driver commits
// itself (Insert, Retry, RetryMatching, Rescue) marks its notifications
// with the driver's token and wakes the driver's own listeners directly
// after the commit; they skip the notifications carrying their token when
// these arrive. A write inside the caller's transaction (InsertTx) becomes
// visible only when the caller commits, which the driver does not see: its
// notifications carry no token and wake every listener, this process's
// included. Listening is in listen.go.

// tokenMark starts the payload of a notification sent by a driver's own
// write: tokenMark, 16 hex digits, a space, then the queue. Queue names
// never contain '@' or ' '.
const tokenMark = "@"

// newToken returns a fresh payload prefix for a driver instance.
func newToken() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return tokenMark + hex.EncodeToString(b[:]) + " "
}

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

// readyQueues returns the distinct queues of the pending tasks among rows
// that are ready at once. Tasks scheduled for later are left to the poll
// (and to the timer of the process that wrote them).
func readyQueues(rows []*driver.TaskRow) []string {
	var queues []string
	for _, r := range rows {
		// run_at and updated_at come from the same now in every write.
		if r.State != driver.StatePending || r.RunAt.After(r.UpdatedAt) || slices.Contains(queues, r.Queue) {
			continue
		}
		queues = append(queues, r.Queue)
	}
	return queues
}

// notifyQueues tells listeners, on commit of the transaction q runs in,
// that queues have ready tasks. own marks a transaction the driver commits
// itself: the caller then calls wakeLocal after the commit, and this
// driver's listeners skip the notifications.
func (d *Driver) notifyQueues(ctx context.Context, q querier, queues []string, own bool) error {
	if len(queues) == 0 {
		return nil
	}
	prefix := ""
	if own {
		prefix = d.wakes.token
	}
	if _, err := q.exec(ctx, notifySQL, []any{d.Channel(), queues, prefix}); err != nil {
		return fmt.Errorf("notify workers: %w", err)
	}
	return nil
}

// notifyReady is notifyQueues for the ready tasks among rows; it returns
// the queues it notified.
func (d *Driver) notifyReady(ctx context.Context, q querier, rows []*driver.TaskRow, own bool) ([]string, error) {
	queues := readyQueues(rows)
	return queues, d.notifyQueues(ctx, q, queues, own)
}

// payloadQueue returns the queue a notification's payload names and
// whether a write of this driver sent it.
func (d *Driver) payloadQueue(payload string) (queue string, own bool) {
	if strings.HasPrefix(payload, d.wakes.token) {
		return payload[len(d.wakes.token):], true
	}
	if strings.HasPrefix(payload, tokenMark) {
		if _, q, ok := strings.Cut(payload, " "); ok {
			return q, false // another driver's write
		}
	}
	return payload, false
}

// insertNotify is insert followed by the notification of the tasks it
// inserted, in the same transaction; own is as for notifyQueues. It
// returns the queues notified.
func (d *Driver) insertNotify(ctx context.Context, q querier, params []driver.InsertParams, own bool) ([]driver.InsertResult, []string, error) {
	out, err := d.insert(ctx, q, params)
	if err != nil {
		return nil, nil, err
	}
	rows := make([]*driver.TaskRow, 0, len(out))
	for _, r := range out {
		if !r.Duplicate {
			rows = append(rows, r.Task)
		}
	}
	queues, err := d.notifyReady(ctx, q, rows, own)
	if err != nil {
		return nil, nil, err
	}
	return out, queues, nil
}

// retryNotify runs the retry statement and notifies its task's queue in one
// transaction, then wakes this driver's listeners; it returns nil when no
// task was retried.
func (d *Driver) retryNotify(ctx context.Context, now time.Time, id int64) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	var queues []string
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		q := pgxQuerier{db: tx}
		var err error
		if row, err = d.one(ctx, q.byID(), d.sql.retry, d.now(now), id); err != nil || row == nil {
			return err
		}
		queues, err = d.notifyReady(ctx, q, []*driver.TaskRow{row}, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.wakeLocal(queues)
	return row, nil
}
