package sqlite

import (
	"database/sql"

	"github.com/keelq/keel/driver"
)

// OpenJournal opens the file at path through this build's SQLite with
// journal_mode set and nothing else: another program's connection.
func OpenJournal(path, journal string) (*sql.DB, error) {
	return openDB(path, connSettings{journal: journal})
}

// ListSQL is List's query and arguments for p.
func (d *Driver) ListSQL(p driver.Filter) (string, []any) { return d.listSQL(p) }

// The counts of a limited claim.
const (
	RunningOfTypeSQL  = sqlRunningOfType
	RunningOfQueueSQL = sqlRunningOfQueue
)

// The claim, by type filter.
const (
	ClaimSQL          = sqlClaim
	ClaimTypesSQL     = sqlClaimTypes
	ClaimExcludingSQL = sqlClaimExcluding
)
