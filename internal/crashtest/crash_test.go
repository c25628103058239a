package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The crash tests re-execute this test binary as a worker process, told
// what to do through these variables.
const (
	envDB   = "KEEL_CRASHTEST_DB"
	envMode = "KEEL_CRASHTEST_MODE" // "work" or "enqueue"
	envNode = "KEEL_CRASHTEST_NODE"
)

const taskType = "crash.task"

type job struct {
	N int `json:"n"`
}

// TestHelperProcess is not a test: it is the worker process the crash
// tests start and kill. It never returns on its own.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(envDB)
	if path == "" {
		t.Skip("the crash tests run this as a subprocess")
	}
	// A helper that outlives its test (the parent died) ends itself.
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: open:", err)
		os.Exit(2)
	}
	switch mode := os.Getenv(envMode); mode {
	case "work":
		c, err := newWorker(drv, os.Getenv(envNode), 300*time.Millisecond, keel.Config{
			LeaseTTL: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		})
		if err == nil {
			err = c.Start(ctx)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper: worker:", err)
			os.Exit(2)
		}
		fmt.Println("ready")
		select {}
	case "enqueue":
		c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper: client:", err)
			os.Exit(2)
		}
		// Several enqueuers, so group commits are in flight when the kill lands.
		var out sync.Mutex
		for g := range 8 {
			go func() {
				for i := g; ; i += 8 {
					info, err := c.Enqueue(ctx, taskType, job{N: i})
					if err != nil {
						fmt.Fprintln(os.Stderr, "helper: enqueue:", err)
						os.Exit(2)
					}
					out.Lock()
					fmt.Printf("acked %d %d\n", info.ID, i)
					out.Unlock()
				}
			}()
		}
		select {}
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
		os.Exit(2)
	}
}

// newWorker returns a client whose handler sleeps for delay (watching its
// context), then records the task's effect in the effects table and
// completes the task in the same transaction.
func newWorker(drv *sqlite.Driver, node string, delay time.Duration, cfg keel.Config) (*keel.Client, error) {
	h := keel.NewHandlers()
	keel.Handle(h, taskType, func(ctx context.Context, task *keel.Task[job]) error {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		tx, err := drv.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if _, err := tx.ExecContext(ctx, `INSERT INTO effects (task_id, node, attempt) VALUES (?, ?, ?)`, task.ID, node, task.Attempt); err != nil {
			return err
		}
		if err := keel.CompleteTx(ctx, tx, map[string]string{"node": node}); err != nil {
			return err
		}
		return tx.Commit()
	})
	cfg.Driver, cfg.Handlers, cfg.Node = drv, h, node
	return keel.NewClient(cfg)
}

// helper starts the test binary as a helper process in mode.
func helper(t *testing.T, mode, path, node string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), envDB+"="+path, envMode+"="+mode, envNode+"="+node)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			cmd.Process.Kill() //nolint:errcheck // it may have exited
			cmd.Wait()         //nolint:errcheck
		}
		if t.Failed() {
			t.Logf("helper %s stderr:\n%s", mode, stderr.String())
		}
	})
	return cmd, &stderr
}

func openDB(t *testing.T, path string) *sqlite.Driver {
	t.Helper()
	drv, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

func counts(t *testing.T, drv driver.Driver) map[driver.State]int64 {
	t.Helper()
	rows, err := drv.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[driver.State]int64{}
	for _, r := range rows {
		out[r.State] += r.Count
	}
	return out
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKilledWorkerTasksRescuedAndAppliedOnce: a worker process is killed
// with SIGKILL while running tasks; a second worker rescues them when
// their leases expire. Every task ends succeeded, none is lost or left
// running, the killed attempts are recorded as lease_expired, and every
// task's effect (written with CompleteTx) exists exactly once.
func TestKilledWorkerTasksRescuedAndAppliedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crash.db")
	drv := openDB(t, path)
	if _, err := drv.DB().ExecContext(ctx, `CREATE TABLE effects (task_id INTEGER NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	enq, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
	if err != nil {
		t.Fatal(err)
	}
	const total = 200
	jobs := make([]keel.Job, total)
	for i := range jobs {
		jobs[i] = keel.Job{Type: taskType, Payload: job{N: i}}
	}
	if _, err := enq.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}

	victim, _ := helper(t, "work", path, "victim")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the victim to finish some tasks and run others", 60*time.Second, func() bool {
		c := counts(t, drv)
		return c[driver.StateSucceeded] >= 10 && c[driver.StateRunning] >= 5
	})
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := victim.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("victim exit: %v, want killed", err)
	}

	// What the victim left behind, exactly: nothing changes until a worker starts.
	killed := map[int64]bool{}
	running, err := drv.List(ctx, driver.ListParams{State: driver.StateRunning, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range running {
		if r.LeaseOwner != "victim" || r.Attempt != 1 {
			t.Fatalf("running task %d owned by %q attempt %d", r.ID, r.LeaseOwner, r.Attempt)
		}
		killed[r.ID] = true
	}
	if len(killed) == 0 {
		t.Fatal("no task was running when the victim was killed")
	}
	doneByVictim := counts(t, drv)[driver.StateSucceeded]
	t.Logf("victim killed with %d tasks running, %d succeeded", len(killed), doneByVictim)

	survivor, err := newWorker(drv, "survivor", 2*time.Millisecond, keel.Config{
		LeaseTTL: 3 * time.Second, HeartbeatInterval: 300 * time.Millisecond, RescueInterval: 50 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, BackoffBase: 10 * time.Millisecond, BackoffJitter: -1,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 20}},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := survivor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every task to succeed", 60*time.Second, func() bool { return counts(t, drv)[driver.StateSucceeded] == total })
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := survivor.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}

	if c := counts(t, drv); c[driver.StateSucceeded] != total || len(c) != 1 {
		t.Fatalf("final states %v, want all %d succeeded", c, total)
	}
	all, err := drv.List(ctx, driver.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total {
		t.Fatalf("%d tasks, want %d", len(all), total)
	}
	effects := map[int64][]string{}
	rows, err := drv.DB().QueryContext(ctx, `SELECT task_id, node, attempt FROM effects`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var node string
		var attempt int
		if err := rows.Scan(&id, &node, &attempt); err != nil {
			t.Fatal(err)
		}
		effects[id] = append(effects[id], fmt.Sprintf("%s#%d", node, attempt))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for _, r := range all {
		eff := effects[r.ID]
		if len(eff) != 1 {
			t.Fatalf("task %d: effects %v, want exactly one", r.ID, eff)
		}
		var expired []driver.AttemptError
		for _, ae := range r.Errors {
			if ae.Outcome == driver.OutcomeLeaseExpired {
				expired = append(expired, ae)
			}
		}
		if killed[r.ID] {
			if len(expired) != 1 || expired[0].Attempt != 1 || expired[0].Node != "victim" {
				t.Fatalf("killed task %d: lease_expired entries %+v, want one for victim attempt 1", r.ID, expired)
			}
			if r.Attempt != 2 || eff[0] != "survivor#2" {
				t.Fatalf("killed task %d: attempt %d effect %v, want survivor#2", r.ID, r.Attempt, eff)
			}
		} else if len(r.Errors) != 0 || r.Attempt != 1 {
			t.Fatalf("task %d was not running at the kill but has attempt %d errors %+v", r.ID, r.Attempt, r.Errors)
		}
	}
	if len(effects) != total {
		t.Fatalf("effects for %d tasks, want %d", len(effects), total)
	}
}

// TestKilledEnqueuerLosesNoAckedTask: an enqueue that returned survives a
// SIGKILL of its process that lands while other enqueues are in flight.
func TestKilledEnqueuerLosesNoAckedTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "enqueue.db")
	openDB(t, path).Close() // create and migrate before the helper starts

	cmd, _ := helper(t, "enqueue", path, "enqueuer")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
			t.Fatalf("helper output %q: %v", sc.Text(), err)
		}
		acked[id] = n
		if len(acked) == 300 && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd.Wait() //nolint:errcheck // killed
	if !killed {
		t.Fatalf("helper ended before it was killed, after %d acks", len(acked))
	}
	drv := openDB(t, path)
	for id, n := range acked {
		row, err := drv.Get(ctx, id)
		if err != nil {
			t.Fatalf("acked task %d lost after the kill: %v", id, err)
		}
		if want := fmt.Sprintf(`{"n":%d}`, n); string(row.Payload) != want || row.State != driver.StatePending {
			t.Fatalf("acked task %d: payload %s state %s, want %s pending", id, row.Payload, row.State, want)
		}
	}
	t.Logf("%d acked tasks survived, %d tasks stored", len(acked), counts(t, drv)[driver.StatePending])
}
