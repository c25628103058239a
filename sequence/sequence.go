// Package sequence lists keel's sequences that a dead member holds.
//
// Tasks enqueued with the same keel.Sequence key run one at a time, in
// enqueue order, across every process; other keys run in parallel. A
// member waits, pending and keel.TaskInfo.Held, until the one before it
// finished. When a member dies, the members after it wait until it is
// retried (Client.Retry), deleted or archived, unless the key's tasks were
// enqueued with keel.SequenceSkipDead; the alert rule sequence_blocked
// fires for each such key. See docs/sequences.md.
package sequence

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/access"
	"github.com/keelq/keel/internal/kerr"
)

// Blocked is a sequence key held by its dead first member.
type Blocked struct {
	Key string
	// DeadID is the dead member; Since is when it died.
	DeadID int64
	Since  time.Time
	// Waiting counts the members held behind it.
	Waiting int64
}

// ListBlocked returns up to limit (1..1000, default 100) keys held by a
// dead member, by key, after the key after ("" for the first page).
func ListBlocked(ctx context.Context, c *keel.Client, after string, limit int) ([]Blocked, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > 1000 {
		return nil, kerr.Invalid("limit must be in 1..1000, got %d", limit)
	}
	p := access.Of(c)
	s, ok := p.Driver.(driver.Sequencer)
	if !ok {
		return nil, fmt.Errorf("%w: this driver keeps no sequences", driver.ErrWrongState)
	}
	rows, err := s.BlockedSequences(ctx, after, limit)
	if err != nil {
		return nil, p.Wrap(ctx, err)
	}
	out := make([]Blocked, len(rows))
	for i, r := range rows {
		out[i] = Blocked{Key: r.Key, DeadID: r.DeadID, Since: r.Since, Waiting: r.Waiting}
	}
	return out, nil
}
