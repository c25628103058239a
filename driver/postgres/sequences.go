package postgres

import (
	"strconv"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// sequenceSQL are the sequence statements (sqlutil.SequenceSQL): a key's
// row is locked FOR UPDATE; READ COMMITTED reads what is committed.
var sequenceSQL = sqlutil.SequenceStatements(sqlutil.SequenceDialect{
	Prefix: "{schema}.",
	Mark:   func(n int) string { return "$" + strconv.Itoa(n) },
	Upsert: `INSERT INTO {schema}.keel_sequences (seq_key, skip_dead, created_at, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (seq_key) DO UPDATE SET skip_dead = EXCLUDED.skip_dead, updated_at = EXCLUDED.updated_at`,
	ForUpdate:   " FOR UPDATE",
	ScanBlocked: sqlutil.ScanBlockedUTC,
})

var _ driver.Sequencer = (*Driver)(nil)
