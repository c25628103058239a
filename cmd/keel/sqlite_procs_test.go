package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/internal/proctest"
)

// TestSQLiteProcessesKeepLiveLeases: three keel serve
// processes on one SQLite file, 2s leases renewed every 400ms, 60,000
// tasks (20,000 drain in a few seconds once writers take turns; more keep
// the file busy longer) enqueued by 12 clients in batches of 100 while 200
// workers per process run them. Every process stays alive, so no task may
// be rescued (error "lease expired") or delivered twice, and no live
// lease may run out: the oldest live lease, sampled from the file every
// 20ms, must always be younger than the lease. Each process's heartbeat
// must get through the file's one write lock in time, whatever the others
// write. Before the writers took turns (the gate), renewals waited up to
// 4.7s, leases went 1.5-3.6s without renewal and live tasks were rescued.
// Renewals slower than half the leases' margin (the heartbeat's "lease
// renewal slow" warning) are logged. The target's read timeout is long and
// the brake is off: on a loaded machine the target (in this process) can
// stall for seconds, and this test judges leases, not the target.
// KEEL_TEST_SQLITE_PROCS_TASKS changes the number of tasks.
func TestSQLiteProcessesKeepLiveLeases(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	total := 60000
	if n, err := strconv.Atoi(os.Getenv("KEEL_TEST_SQLITE_PROCS_TASKS")); err == nil && n > 0 {
		total = n
	}
	const (
		lease        = 2 * time.Second
		handlerDelay = 5 * time.Millisecond
		workers      = 200
		batch        = 100
		senders      = 12
	)

	var calls sync.Map // task id → *atomic.Int32
	var delivered atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := calls.LoadOrStore(r.Header.Get("Keel-Task-Id"), new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		delivered.Add(1)
		time.Sleep(handlerDelay)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()

	dir := t.TempDir()
	db := filepath.Join(dir, "keel.db")
	cfg := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
shutdown_timeout = "5s"
[log]
level = "warn"
[engine]
lease_ttl = "2s"
heartbeat_interval = "400ms"
rescue_interval = "100ms"
poll_interval = "50ms"
[queues.default]
workers = %d
[types.t]
url = %q
read_timeout = "60s"
[types.t.brake]
off = true
`, workers, target.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	var procs []*served
	for i := range 3 {
		procs = append(procs, startServe(t, bin, []string{"KEEL_ENGINE_NODE=node" + strconv.Itoa(i)},
			"--db", db, "--listen", "127.0.0.1:0", "--config", cfg))
	}

	ro, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var staleMax atomic.Int64 // µs
	sampling := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		for {
			select {
			case <-sampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var oldest sql.NullInt64
			now := time.Now()
			if err := ro.QueryRow(`SELECT min(lease_expires_at) FROM keel_tasks WHERE state = 'running'`).Scan(&oldest); err != nil || !oldest.Valid {
				continue
			}
			stale := now.UnixMicro() - (oldest.Int64 - lease.Microseconds())
			for old := staleMax.Load(); stale > old && !staleMax.CompareAndSwap(old, stale); old = staleMax.Load() {
			}
		}
	}()

	start := time.Now()
	var next atomic.Int64
	var sent sync.WaitGroup
	for range senders {
		sent.Add(1)
		go func() {
			defer sent.Done()
			for {
				i := int(next.Add(int64(batch))) - batch
				if i >= total {
					return
				}
				var b strings.Builder
				b.WriteString(`{"tasks":[`)
				for j := i; j < min(i+batch, total); j++ {
					if j > i {
						b.WriteString(",")
					}
					fmt.Fprintf(&b, `{"type":"t","payload":{"n":%d}}`, j)
				}
				b.WriteString(`]}`)
				resp, err := http.Post(procs[i/batch%len(procs)].addr+"/v1/tasks/batch", "application/json", bytes.NewReader([]byte(b.String())))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("enqueue batch: %s", resp.Status)
					return
				}
			}
		}()
	}
	sent.Wait()
	if t.Failed() {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for {
		var done int
		if err := ro.QueryRowContext(ctx, `SELECT count(*) FROM keel_tasks WHERE state = 'succeeded'`).Scan(&done); err != nil {
			t.Fatal(err)
		}
		if done == total {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d tasks succeeded after %v", done, total, time.Since(start))
		case <-time.After(200 * time.Millisecond):
		}
	}
	close(sampling)
	sampled.Wait()
	took := time.Since(start)

	var rescued int
	if err := ro.QueryRow(`SELECT count(*) FROM keel_tasks WHERE errors LIKE '%lease expired%'`).Scan(&rescued); err != nil {
		t.Fatal(err)
	}
	twice := 0
	calls.Range(func(_, v any) bool {
		if v.(*atomic.Int32).Load() > 1 {
			twice++
		}
		return true
	})
	t.Logf("%d tasks on 3 processes in %v; oldest live lease at most %v since its renewal (lease 2s, heartbeat 400ms); %d rescued, %d delivered twice, %d deliveries",
		total, took.Round(time.Millisecond), (time.Duration(staleMax.Load()) * time.Microsecond).Round(time.Millisecond), rescued, twice, delivered.Load())
	if rescued != 0 || twice != 0 {
		t.Errorf("live processes lost leases: %d tasks rescued, %d delivered twice", rescued, twice)
	}
	if stale := time.Duration(staleMax.Load()) * time.Microsecond; stale >= lease {
		t.Errorf("a live lease went %v without renewal: it ran out, whether or not the rescuer saw it", stale)
	}
	for i, p := range procs {
		if n := strings.Count(p.stderr.String(), "lease renewal slow"); n > 0 {
			t.Logf("process %d warned of %d renewals slower than half the leases' margin", i, n)
		}
	}
}

// TestSQLiteProcessesStartTogether: five keel serve
// processes started at once on a new SQLite file all come up; the ones
// that find another migrating wait for it instead of failing with
// SQLITE_BUSY.
func TestSQLiteProcessesStartTogether(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	for round := range 2 {
		db := filepath.Join(t.TempDir(), "keel.db")
		procs := make([]*exec.Cmd, 5)
		outs := make([]*proctest.Buffer, 5)
		for i := range procs {
			procs[i] = exec.Command(bin, "serve", "--db", db, "--listen", "127.0.0.1:0")
			procs[i].Env = append(cleanEnv(), "KEEL_ENGINE_NODE=node"+strconv.Itoa(i))
			outs[i] = &proctest.Buffer{}
			procs[i].Stderr = outs[i]
		}
		for _, p := range procs {
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, p := range procs {
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(outs[i].String(), "keel: listening on ") && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if !strings.Contains(outs[i].String(), "keel: listening on ") {
				t.Errorf("round %d: process %d did not come up:\n%s", round, i, outs[i].String())
			}
			_ = p
		}
		for _, p := range procs {
			p.Process.Kill() //nolint:errcheck // it may have exited
			p.Wait()         //nolint:errcheck // killed
		}
		if t.Failed() {
			return
		}
	}
}
