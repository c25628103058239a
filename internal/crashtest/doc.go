// Package crashtest proves keel's crash promises with real processes, on
// every database: its tests start workers and enqueuers as subprocesses (the
// test binary re-executed), kill them with SIGKILL, kill the leader,
// terminate their database sessions and restart the database server, and
// check that nothing was lost, nothing stuck and nothing applied twice. It
// has no API; everything is in its tests.
//
// A killed worker, a killed leader and a worker killed inside a durable
// step are keel chaos's scenarios (internal/chaos, the package the command
// runs), tested there on every database; they have no copy here.
// KilledWorkersNoBrake (brake_test.go) kills one of three
// worker processes three times during a drain and checks that the automatic
// brake, with its defaults, never opens: expired leases are no evidence.
// BatchUnderKills (batch_test.go) drains one batch with an on_success
// callback with three worker processes, kills one of them five times, and
// checks that every member was applied once and the callback enqueued
// once, after the last member, with exact counts, and run once.
// DiamondUnderKills (diamond_test.go) works 200 workflow diamonds (A, then
// B and C, then D) with three worker processes, kills one three times and
// then the leader, and checks that every D ran once, after its B and C
// succeeded, and that a diamond whose B died has its D cancelled, unrun,
// with the reason.
// SequencesUnderKills (sequences_test.go) drains 20 sequence keys of 200
// members each, enqueued interleaved while the workers
// run, with three worker processes, kills one of them four times, and
// checks from the runs the handler records with its completion, and the
// attempts it records as they begin, that within each key the members
// ran one at a time, in enqueue order, killed attempts included, while
// the keys ran in parallel; that no key ever had two members running or
// ready; and that every member was applied once and left its key.
//
// The scenarios are written once (scenarios_test.go) and run against each
// database by TestSQLite, TestPostgres and TestMariaDB, as
// driver/drivertest runs one suite against every driver. Each test gets its
// own SQLite file, PostgreSQL schema or MariaDB database from
// internal/testdb (KEEL_TEST_POSTGRES and KEEL_TEST_MYSQL name the
// servers). TestPostgresRestart and TestMariaDBRestart stop and start a
// server of their own (testdb.PrivatePostgres, testdb.PrivateMariaDB: a
// temporary directory and a free port), never the machine's.
package crashtest
