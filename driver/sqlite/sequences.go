package sqlite

import (
	"strconv"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// sequenceSQL are the sequence statements (sqlutil.SequenceSQL). SQLite's
// single writer serializes every write, so locking a key is reading it.
var sequenceSQL = sqlutil.SequenceStatements(sqlutil.SequenceDialect{
	Mark: func(n int) string { return "?" + strconv.Itoa(n) },
	Upsert: `INSERT INTO keel_sequences (seq_key, skip_dead, created_at, updated_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (seq_key) DO UPDATE SET skip_dead = excluded.skip_dead, updated_at = excluded.updated_at`,
	ScanBlocked: func(scan sqlutil.Scan) (*driver.BlockedSequence, error) { return sqlutil.ScanBlocked(scan, optTime) },
})

var _ driver.Sequencer = (*Driver)(nil)
