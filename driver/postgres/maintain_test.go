package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
)

// TestMaintainVacuumsWhereAutovacuumIsOff: a task table whose autovacuum is
// disabled and that holds many dead rows is vacuumed by Maintain, which
// then, and on a table without dead rows, does nothing.
func TestMaintainVacuumsWhereAutovacuumIsOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	table := pgx.Identifier{d.Schema(), "keel_tasks"}.Sanitize()
	if _, err := pool.Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}

	r, err := d.Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Vacuumed || r.Autovacuum || r.DeadRows != 0 || !strings.Contains(r.Reason, "below the threshold") {
		t.Fatalf("empty table: %+v, want no vacuum, autovacuum off, no dead rows", r)
	}
	if last := lastVacuum(t, d); last != nil {
		t.Fatalf("empty table vacuumed at %v", last)
	}

	// 3,000 tasks, each updated twice (claimed, finished): 6,000 dead rows.
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (queue, type, payload, state, max_attempts, run_at, timeout_ms,
		payload_digest, created_at, updated_at)
		SELECT 'default', 'maint.test', '{}', 'pending', 4, now(), 60000, '', now(), now() FROM generate_series(1, 3000)`); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"running", "succeeded"} {
		if _, err := pool.Exec(ctx, `UPDATE `+table+` SET state = $1, updated_at = now()`, state); err != nil {
			t.Fatal(err)
		}
	}
	r = waitForDeadRows(t, d, func(r driver.MaintainReport) bool { return r.DeadRows >= 6000 })
	if r.Vacuumed || r.Autovacuum || r.Threshold > r.DeadRows {
		t.Fatalf("check with dead rows: %+v, want no vacuum, autovacuum off, dead rows past the threshold", r)
	}

	r, err = d.Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Vacuumed || r.DeadRows < 6000 || !strings.Contains(r.Reason, "autovacuum is off") {
		t.Fatalf("table with dead rows: %+v, want a vacuum because autovacuum is off", r)
	}
	if lastVacuum(t, d) == nil {
		t.Fatal("Maintain reported a vacuum but pg_stat_user_tables has no last_vacuum")
	}
	// A vacuum removes only the dead rows no open snapshot can still see:
	// a long transaction of another test on this server holds them back.
	// Until they are gone, the table is still past its threshold and
	// Maintain must vacuum it again.
	for deadline := time.Now().Add(90 * time.Second); ; {
		r, err = d.CheckMaintenance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.DeadRows < r.Threshold {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("statistics never showed the dead rows gone: %+v", r)
		}
		time.Sleep(2 * time.Second)
		if r, err = d.Maintain(ctx); err != nil {
			t.Fatal(err)
		}
		if r.DeadRows >= r.Threshold && !r.Vacuumed {
			t.Fatalf("dead rows past the threshold: %+v, want another vacuum", r)
		}
		t.Logf("dead rows held back by another snapshot; vacuumed again: %+v", r)
	}
	if r.LiveRows != 3000 {
		t.Errorf("after the vacuum: %+v, want 3000 live rows", r)
	}

	r, err = d.Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Vacuumed {
		t.Fatalf("vacuumed table: %+v, want nothing done", r)
	}
}

// waitForDeadRows polls CheckMaintenance until ok (statistics reach the
// server within about a second of a transaction's end).
func waitForDeadRows(t *testing.T, d *postgres.Driver, ok func(driver.MaintainReport) bool) driver.MaintainReport {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := d.CheckMaintenance(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("statistics never showed the rows expected: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastVacuum(t *testing.T, d *postgres.Driver) *time.Time {
	t.Helper()
	var last *time.Time
	if err := pool.QueryRow(context.Background(), `SELECT last_vacuum FROM pg_stat_user_tables
		WHERE relid = ($1 || '.keel_tasks')::regclass`, pgx.Identifier{d.Schema()}.Sanitize()).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return last
}

// TestLeaderMaintainsTaskTable: a started client, which leads, vacuums a
// task table that holds dead rows and whose autovacuum is off, on becoming
// the leader, and logs it.
func TestLeaderMaintainsTaskTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	table := pgx.Identifier{d.Schema(), "keel_tasks"}.Sanitize()
	for _, stmt := range []string{
		`ALTER TABLE ` + table + ` SET (autovacuum_enabled = false)`,
		`INSERT INTO ` + table + ` (queue, type, payload, state, max_attempts, run_at, timeout_ms, payload_digest, created_at, updated_at)
		SELECT 'default', 'maint.test', '{}', 'succeeded', 4, now(), 60000, '', now(), now() FROM generate_series(1, 2000)`,
		`UPDATE ` + table + ` SET updated_at = now()`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	waitForDeadRows(t, d, func(r driver.MaintainReport) bool { return r.DeadRows >= r.Threshold })

	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := keel.NewHandlers()
	keel.Handle(h, "maint.test", func(context.Context, *keel.Task[struct{}]) error { return nil })
	c, err := keel.NewClient(keel.Config{Driver: d, Handlers: h, Logger: log, MaintainInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx) //nolint:errcheck // stopped below; a failed test stops it too
	// The statistics show the vacuum as soon as the server finished it,
	// before the leader heard back and logged it: wait for the log line.
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logged(), "vacuumed the task table") {
		if time.Now().After(deadline) {
			t.Fatalf("the leader did not vacuum the task table (or did not log it):\n%s", logged())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if out := logged(); !strings.Contains(out, "autovacuum is off") {
		t.Errorf("the vacuum's log line does not give its reason:\n%s", out)
	}
	if lastVacuum(t, d) == nil {
		t.Error("logged a vacuum, but the statistics show none")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
