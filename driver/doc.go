// Package driver defines the storage contract between keel's engine and a
// database, and the row types both sides share.
//
// A driver is a list of queries: one method per operation, a params struct
// per method, ctx first. Differences between databases stay inside the
// driver; the engine never switches on a dialect. Every driver must pass the
// conformance suite in driver/drivertest against a real database.
//
// The SQL drivers (sqlite, postgres, mysql) name their files by concern,
// with the same name in every driver for the same concern (tasks.go,
// insert.go, claim.go, finish.go, leases.go, admin.go, alerts.go,
// archive.go, backlog.go, brakes.go, counters.go, idempotency_http.go,
// limits.go, migrate.go, nodes.go, schedules.go, sources.go, queries.go,
// rows.go, shared.go); a concern only one database has keeps a name of its
// own (SQLite's writer.go and gate.go, PostgreSQL's listen.go, notify.go
// and copy.go, MySQL's stmt.go and unavailable.go). What they share lives
// in driver/internal/sqlutil, and each driver's shared.go hands it the
// driver's statements, handles and time encoding.
package driver
