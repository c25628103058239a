package mysql

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// sequenceSQL are the sequence statements (sqlutil.SequenceSQL): a key's
// row is locked FOR UPDATE, and its members counted with a locking read,
// which reads what is committed now, not the transaction's snapshot; tasks
// are updated through the primary key.
var sequenceSQL = sqlutil.SequenceStatements(sqlutil.SequenceDialect{
	Mark: sqlutil.Question,
	Upsert: `INSERT INTO keel_sequences (seq_key, skip_dead, created_at, updated_at) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE skip_dead = VALUES(skip_dead), updated_at = VALUES(updated_at)`,
	ForUpdate:   " FOR UPDATE",
	CurrentRead: " LOCK IN SHARE MODE",
	ScanBlocked: sqlutil.ScanBlockedUTC,
	// A release read through keel_tasks_state took next-key locks there,
	// in the caller's transaction of CompleteTx, and deadlocked with a
	// claim whose pick had locked the held member's keel_tasks_claim entry.
	ByID: byID,
})

var _ driver.Sequencer = (*Driver)(nil)
