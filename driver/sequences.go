package driver

import (
	"context"
	"time"
)

// Sequencer is implemented by drivers that keep sequences: tasks with the
// same sequence key (InsertParams.Sequence) run one at a time, in enqueue
// order, across every process sharing the database.
//
// A driver's Insert and InsertTx take tasks with a key: each key's first
// member not behind an unfinished one stays ready, every other is inserted
// held (run_at at HeldUntil). A driver's Finish releases the next member
// of a key in the transaction that finishes the one before it (succeeded,
// or dead with SkipDead). Every other way a member ends (cancelled, dead
// by the rescuer, archived, purged) is settled by SettleSequences, which
// the leader runs every second.
type Sequencer interface {
	// SettleSequences looks at up to limit keys whose first member is not
	// running or ready: it drops members that finished (or left the task
	// table) from their key and releases the next member, now, when no
	// member of its key runs. It returns how many members it released.
	SettleSequences(ctx context.Context, now time.Time, limit int) (int, error)
	// PruneSequences forgets the keys with no member left that no enqueue
	// used since before, and returns how many.
	PruneSequences(ctx context.Context, before time.Time) (int64, error)
	// BlockedSequences lists up to limit keys held by a dead member (one
	// enqueued without SkipDead), by key, after the key after.
	BlockedSequences(ctx context.Context, after string, limit int) ([]BlockedSequence, error)
}

// BlockedSequence is a sequence key whose first member is dead: the
// members after it wait until it is retried, deleted or archived.
type BlockedSequence struct {
	Key string
	// DeadID is the dead member that holds the key.
	DeadID int64
	// Waiting counts the members held behind it.
	Waiting int64
	// Since is when the dead member died.
	Since time.Time
}

// MaxSequenceKey is the longest sequence key, in bytes.
const MaxSequenceKey = 255
