package postgres

import "github.com/keelq/keel/driver"

// Statements the plan tests explain.
func (d *Driver) ClaimSQL() string       { return d.sql.claim }
func (d *Driver) ClaimTypesSQL() string  { return d.sql.claimTypes }
func (d *Driver) ExpiredSQL() string     { return d.sql.expired }
func (d *Driver) CountAheadSQL() string  { return d.sql.countAhead }
func (d *Driver) SucceedManySQL() string { return d.sql.succeedMany }
func (d *Driver) TransitionSQL() string  { return d.sql.transition }
func (d *Driver) HeartbeatSQL() string   { return d.sql.heartbeat }

// RunningOfTypeSQL and RunningOfQueueSQL are a limited claim's counts.
func (d *Driver) RunningOfTypeSQL() string  { return d.sql.runningOfType }
func (d *Driver) RunningOfQueueSQL() string { return d.sql.runningOfQueue }

// ListSQL is List's query and arguments for p.
func (d *Driver) ListSQL(p driver.Filter) (string, []any) { return d.listSQL(p) }
func (d *Driver) ArchiveSQL(state string) string {
	return map[string]string{"succeeded": d.sql.archiveSucceeded, "cancelled": d.sql.archiveCancelled, "dead": d.sql.archiveDead}[state]
}
func (d *Driver) RecentFinishedSQL() string   { return d.sql.recentFinished }
func (d *Driver) ByKeySQL() string            { return d.sql.byKey }
func (d *Driver) RetryMatchingIDsSQL() string { return d.sql.retryMatchingIDs }
func (d *Driver) PurgeMatchingIDsSQL() string { return d.sql.purgeMatchingIDs }
