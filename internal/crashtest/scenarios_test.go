package crashtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/proctest"
)

// run runs every crash scenario against database b, one after the other:
// they assert rescue times, so they do not share the CPUs. A killed
// worker, a killed leader and a worker killed inside a durable step are
// keel chaos's scenarios (internal/chaos), tested there and run by .ci/run
// on every database: there is no second copy here.
func run(t *testing.T, b *backend) {
	t.Run("KilledEnqueuer", func(t *testing.T) { killedEnqueuer(t, b) })
	t.Run("TerminatedSessions", func(t *testing.T) { terminatedSessions(t, b) })
	t.Run("DeadFollowUps", func(t *testing.T) { deadFollowUps(t, b) })
	t.Run("ScheduleFailover", func(t *testing.T) { scheduleFailover(t, b) })
	t.Run("ClusterLimit", func(t *testing.T) { clusterLimit(t, b) })
	t.Run("KilledWorkersNoBrake", func(t *testing.T) { killedWorkersNoBrake(t, b) })
	t.Run("BatchUnderKills", func(t *testing.T) { batchUnderKills(t, b) })
	t.Run("DiamondUnderKills", func(t *testing.T) { diamondUnderKills(t, b) })
	t.Run("SequencesUnderKills", func(t *testing.T) { sequencesUnderKills(t, b) })
}

// killedEnqueuer: an enqueue that returned survives a SIGKILL of its
// process that lands while other enqueues are in flight.
func killedEnqueuer(t *testing.T, b *backend) {
	e := setup(t, b)
	cmd := e.helperCmd("enqueue", "enqueuer", 0)
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() //nolint:errcheck // it may have exited
			cmd.Wait()         //nolint:errcheck // killed
		}
		if t.Failed() {
			t.Logf("enqueuer stderr (last 4 kB):\n%s", proctest.Tail(stderr.String(), 4096))
		}
	})
	acked := map[int64]int{}
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "acked" {
			continue
		}
		id, err1 := strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("enqueuer output %q: %v", sc.Text(), err)
		}
		acked[id] = n
		if len(acked) == 300 && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("the enqueuer ended before it was killed, after %d acks: %v", len(acked), err)
	}
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("enqueuer exit: %v, want killed", err)
	}
	for id, n := range acked {
		row, err := e.drv.Get(e.ctx, id)
		if err != nil {
			t.Fatalf("acked task %d lost after the kill: %v", id, err)
		}
		var got job
		if err := json.Unmarshal(row.Payload, &got); err != nil || got.N != n || row.State != driver.StatePending {
			t.Fatalf("acked task %d: payload %s (%v) state %s, want n=%d pending", id, row.Payload, err, row.State, n)
		}
	}
	t.Logf("%d acked tasks survived, %d tasks stored", len(acked), e.counts()[driver.StatePending])
}

// terminatedSessions: while three workers run and the test enqueues, every
// database session of the workers and of the test's enqueuer is terminated
// several times. Workers and enqueuer reconnect on their own; every enqueue
// that returned success is stored and succeeds, and every task's effect is
// applied exactly once.
func terminatedSessions(t *testing.T, b *backend) {
	if b.terminate == nil {
		t.Skipf("%s: the test cannot tell the workers' sessions from its own, so it cannot end only theirs", b.name)
	}
	e := setup(t, b)
	enq := e.enqueuer(e.app) // its sessions are terminated too
	for _, n := range []string{"t1", "t2", "t3"} {
		e.startWorker(n, 3*time.Millisecond)
	}
	stop := make(chan struct{})
	acked, failed, wg := e.enqueueLoop(enq, 4, stop)

	var terminated []int64
	for range 4 {
		time.Sleep(1200 * time.Millisecond)
		n, err := b.terminate(e, e.app)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		terminated = append(terminated, n)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if slices.Contains(terminated, 0) {
		t.Fatalf("sessions terminated per round %v: a round found none", terminated)
	}
	ids := acked()
	t.Logf("terminated sessions per round %v; %d enqueues acknowledged, %d failed", terminated, len(ids), failed())
	if len(ids) < 100 {
		t.Fatalf("only %d enqueues acknowledged", len(ids))
	}
	total := e.taskCount()
	e.waitAllSucceeded(total, 60*time.Second)
	e.checkAcked(ids)
	e.checkExactlyOnce(total)
}
