// Package pgcrashtest holds keel's multi-process tests against PostgreSQL:
// worker processes (this package's test binary, re-executed) are killed
// with SIGKILL, their database sessions terminated, their leader killed
// and the server restarted, while every task must still run to success
// with its effect applied exactly once. The tests need PostgreSQL at
// 127.0.0.1:5432 (KEEL_TEST_POSTGRES overrides it); each uses its own
// schema. TestPostgresRestart stops the shared server and runs only with
// KEEL_TEST_PG_RESTART=1 (a separate step of .ci/run).
package pgcrashtest
