// Package chaos runs keel's crash scenarios against a database a team
// names: it is what keel chaos runs, and what internal/crashtest calls for
// the scenarios they share (one implementation).
//
// Run makes, for each scenario, a private SQLite file (next to the file
// named, which it never opens), PostgreSQL schema or MariaDB database
// (keel_chaos_ and 8 random hex digits), starts worker processes from the
// caller's binary (Options.Command: keel's hidden chaos-worker mode, or a
// test binary whose TestMain calls WorkerMain when IsWorker), faults them,
// checks every task and drops what it made.
//
// The workers' handler writes a ledger row in the transaction that
// completes the task (keel.CompleteTx), so a row exists exactly when the
// completion committed. The audit after each scenario counts the tasks
// lost (missing, dead, cancelled, or succeeded without their row), applied
// twice (more than one row: a task may run again, fencing lets one
// completion commit), and stuck (unfinished when Options.Duration ran
// out), and has the driver check its live counters.
//
// The scenarios (Scenarios, About): kill-worker (SIGKILL mid-batch),
// stop-worker (SIGSTOP past the lease, then SIGCONT: late completions are
// fenced), kill-leader, cut (every connection cut for 4s through a local
// TCP proxy, proxy.go; PostgreSQL and MariaDB over TCP), sigterm (a
// graceful stop within its deadline releases what it held) and
// kill-in-step (durable steps survive). They measure rescue, takeover,
// recovery and stop times against bounds computed from Options.Timing.
package chaos
