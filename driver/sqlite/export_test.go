package sqlite

import "github.com/keelq/keel/driver"

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
