// Package mysqlcrashtest holds keel's multi-process tests against MySQL /
// MariaDB: worker processes (this package's test binary, re-executed) are
// killed with SIGKILL and the server is restarted, while every task must
// still run to success with its effect applied exactly once. The tests need
// MariaDB (or MySQL) at 127.0.0.1:3306, user root without a password
// (KEEL_TEST_MYSQL, a go-sql-driver DSN, overrides it); each uses its own
// database keel_crash_<random>, dropped at the end. TestMariaDBRestart
// stops the shared server and runs only with KEEL_TEST_MARIADB_RESTART=1 (a
// separate step of .ci/run).
package mysqlcrashtest
