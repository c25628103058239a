package sqlutil

import (
	"slices"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
)

// Claimed collects the rows of one claim: scan each row into its fields,
// then Add it; Rows returns them in one slice of their exact size. Grown
// row by row, the slice of a claim of 500 tasks allocated twice its rows'
// size, the drain's largest allocation. Take one with GetClaimed and give
// it back with Release once Rows is taken.
type Claimed struct {
	ID, Fence, TimeoutMS                          int64
	Type, Sequence                                string
	Priority, Attempt, MaxAttempts, Snoozes       int
	Payload, Meta                                 []byte
	RunAt, CreatedAt, LeaseExpiresAt, AttemptedAt time.Time

	rows []driver.TaskRow
}

var claimedPool = sync.Pool{New: func() any { return new(Claimed) }}

// GetClaimed returns an empty Claimed.
func GetClaimed() *Claimed { return claimedPool.Get().(*Claimed) }

// Add appends the row in c's fields, claimed for p: running, leased to
// p.Owner, its times in UTC (LeaseExpiresAt and AttemptedAt stay zero
// where the claim does not read them).
func (c *Claimed) Add(p driver.ClaimParams) {
	c.rows = append(c.rows, driver.TaskRow{ID: c.ID, Queue: p.Queue, Type: c.Type, Priority: c.Priority,
		Payload: c.Payload, State: driver.StateRunning, Attempt: c.Attempt, MaxAttempts: c.MaxAttempts,
		Snoozes: c.Snoozes, Fence: c.Fence, RunAt: c.RunAt.UTC(), Timeout: time.Duration(c.TimeoutMS) * time.Millisecond,
		LeaseOwner: p.Owner, LeaseExpiresAt: c.LeaseExpiresAt.UTC(), CreatedAt: c.CreatedAt.UTC(),
		AttemptedAt: c.AttemptedAt.UTC(), Meta: c.Meta, Sequence: c.Sequence})
	c.Payload, c.Meta = nil, nil // the next row's scan gives its own
}

// Len is the number of rows added.
func (c *Claimed) Len() int { return len(c.rows) }

// Rows returns a copy of the rows added, nil for none.
func (c *Claimed) Rows() []driver.TaskRow {
	if len(c.rows) == 0 {
		return nil
	}
	return slices.Clone(c.rows)
}

// Release empties c, dropping its rows' payloads and strings, and pools it.
func (c *Claimed) Release() {
	clear(c.rows)
	*c = Claimed{rows: c.rows[:0]}
	claimedPool.Put(c)
}
