package postgres

// Statements the plan tests explain.
func (d *Driver) ClaimSQL() string      { return d.sql.claim }
func (d *Driver) ExpiredSQL() string    { return d.sql.expired }
func (d *Driver) CountAheadSQL() string { return d.sql.countAhead }
