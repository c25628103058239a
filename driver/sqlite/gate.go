package sqlite

import "time"

// The gate makes the keel processes that share one file take turns at its
// write lock. SQLite's lock is no queue: a process that finds it taken
// sleeps in the busy handler's steps (1ms at first, 100ms after a quarter
// of a second) and tries again, while a busy process releases the lock at
// its commit and takes it again microseconds later for its next batch. On
// a busy file a waiting process could so miss the lock for seconds, and
// its heartbeat with it: live leases of 2s ran out.
//
// The gate is two locks of the file "<database>-lock", taken in turn (a
// turnstile): a writer takes the entry lock, then the gate lock, then lets
// the entry lock go, and holds the gate lock until its commit. A process
// that has just committed and wants the lock again must pass the entry
// lock, which a waiting process holds until it got the gate lock: so the
// waiting process writes next. Each lock is tried in steps of at most
// gateStep, so a turn passes within about that much.
//
// Every transaction begun on the writer connection takes the gate: the
// writer's batches, the migrations and a caller's transaction on DB()
// (gate_conn.go). The gate is advisory and only orders keel's own
// writers: SQLite's lock still decides, so a process that cannot use the
// gate (another operating system, a directory it may not create files in)
// or another program writing the file is as safe as before, only not
// queued.

// gateStep is the longest wait between two tries of a gate lock.
const gateStep = 500 * time.Microsecond

// gatePatience bounds the wait for a turn. A turn lasts one write of each
// other process, milliseconds, or a few hundred on a machine short of CPU;
// a gate held longer is held by a process that stopped (SIGSTOP, a
// debugger) between two writes, and must not hold up the others: the
// writer then goes on without the gate, and until it gets the gate again
// it waits for it at most gateStuckWait per write.
const (
	gatePatience  = 2 * time.Second
	gateStuckWait = 100 * time.Millisecond
)

// The byte offsets of the two locks in the gate file.
const (
	gateEntry = 0
	gateWrite = 1
)

// enter takes the gate and reports whether it did; leave releases it. A
// nil gate (none could be opened) is never entered. Only the writer
// calls them.
func (g *gate) enter(patience time.Duration) bool {
	if g == nil {
		return false
	}
	if g.stuck {
		patience = min(patience, gateStuckWait)
	}
	deadline := time.Now().Add(patience)
	if !g.lockBy(gateEntry, deadline) {
		g.stuck = true
		return false
	}
	ok := g.lockBy(gateWrite, deadline)
	g.unlock(gateEntry)
	g.stuck = !ok
	return ok
}

func (g *gate) leave() { g.unlock(gateWrite) }

// lockBy takes the lock at byte off, trying until deadline.
func (g *gate) lockBy(off int64, deadline time.Time) bool {
	for wait := 20 * time.Microsecond; ; wait = min(2*wait, gateStep) {
		if g.tryLock(off) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}
