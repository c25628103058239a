package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
)

// Vacuum policy of Maintain. A task table needs a vacuum once its dead row
// versions pass vacuumBase plus vacuumScale of its live rows: every claimed
// task leaves a dead entry at the head of the claim index, which each later
// claim steps over until a vacuum removes it (27 ms per claim of 500 with
// 1.1 million of them, against 0.3 ms after a vacuum). The scale matches
// the table's autovacuum_vacuum_scale_factor (migration 003).
const (
	vacuumBase  = 1000
	vacuumScale = 100 // 1 % of the live rows
	// autovacuumLate is how long dead rows may stay past the threshold,
	// with no vacuum of the table, before Maintain stops waiting for an
	// enabled autovacuum and vacuums itself.
	autovacuumLate = 5 * time.Minute
)

// maintState is what Maintain remembers between calls to tell whether an
// enabled autovacuum keeps up.
type maintState struct {
	mu sync.Mutex
	// behindSince is when dead rows were first seen past the threshold
	// with lastVacuum as it is; zero while they are not.
	behindSince time.Time
	lastVacuum  time.Time
}

// tableHealth is one reading of the task table's statistics.
type tableHealth struct {
	live, dead int64
	lastVacuum time.Time // the later of the last manual and auto vacuum
	autovacuum bool      // the server's autovacuum is on and the table allows it
	vacuuming  bool      // a vacuum of the table is running now
}

// readHealth reads the statistics of keel_tasks: one row of
// pg_stat_user_tables and the settings that decide whether autovacuum
// works on it.
func (d *Driver) readHealth(ctx context.Context) (tableHealth, error) {
	var h tableHealth
	var last *time.Time
	var opts []string
	var server bool
	err := d.pool.QueryRow(ctx, d.q(`SELECT s.n_live_tup, s.n_dead_tup, greatest(s.last_vacuum, s.last_autovacuum),
	current_setting('autovacuum')::bool AND current_setting('track_counts')::bool,
	coalesce(c.reloptions, '{}'),
	EXISTS (SELECT 1 FROM pg_stat_progress_vacuum p WHERE p.relid = s.relid)
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.relid = '{schema}.keel_tasks'::regclass`)).Scan(&h.live, &h.dead, &last, &server, &opts, &h.vacuuming)
	if err != nil {
		return h, fmt.Errorf("postgres: read the task table's statistics: %w", err)
	}
	if last != nil {
		h.lastVacuum = *last
	}
	h.autovacuum = server && tableAutovacuum(opts)
	return h, nil
}

// tableAutovacuum reports whether a table's reloptions leave autovacuum
// enabled (autovacuum_enabled is a boolean: false, off, no, 0 or a prefix
// of them turn it off).
func tableAutovacuum(reloptions []string) bool {
	for _, o := range reloptions {
		name, value, ok := strings.Cut(o, "=")
		if !ok || strings.ToLower(strings.TrimSpace(name)) != "autovacuum_enabled" {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "false", "f", "fa", "fal", "fals", "off", "of", "no", "n", "0":
			return false
		}
	}
	return true
}

// CheckMaintenance reads the task table's statistics and reports them the
// way Maintain would, without vacuuming: Vacuumed is false and Reason says
// what Maintain would do. keel bench uses it to wait for the leader (or
// autovacuum) to catch up after a prefill.
func (d *Driver) CheckMaintenance(ctx context.Context) (driver.MaintainReport, error) {
	h, err := d.readHealth(ctx)
	if err != nil {
		return driver.MaintainReport{}, err
	}
	r, _ := d.decide(h, time.Now(), false)
	return r, nil
}

// Maintain vacuums keel_tasks (VACUUM (ANALYZE)) when its dead rows passed
// the threshold and autovacuum is not handling it: autovacuum is off for
// the server or the table, or has left the rows past the threshold for
// more than 5 minutes. It does nothing while a vacuum of the table runs.
// When nothing is needed it costs one read of the table's statistics.
func (d *Driver) Maintain(ctx context.Context) (driver.MaintainReport, error) {
	h, err := d.readHealth(ctx)
	if err != nil {
		return driver.MaintainReport{}, err
	}
	r, vacuum := d.decide(h, time.Now(), true)
	if !vacuum {
		return r, nil
	}
	start := time.Now()
	if err := d.Vacuum(ctx); err != nil {
		return r, err
	}
	r.Vacuumed, r.Took = true, time.Since(start)
	d.maint.mu.Lock()
	d.maint.behindSince = time.Time{}
	d.maint.mu.Unlock()
	return r, nil
}

// decide is Maintain's policy: the report of h and whether to vacuum now.
// remember updates the state that tracks an enabled autovacuum; a check
// that does not act leaves it alone.
func (d *Driver) decide(h tableHealth, now time.Time, remember bool) (driver.MaintainReport, bool) {
	r := driver.MaintainReport{LiveRows: h.live, DeadRows: h.dead, Threshold: vacuumBase + h.live/vacuumScale, Autovacuum: h.autovacuum,
		LastVacuum: h.lastVacuum, Vacuuming: h.vacuuming}
	m := &d.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	behind := m.behindSince
	switch {
	case h.dead < r.Threshold:
		behind = time.Time{}
	case behind.IsZero() || !h.lastVacuum.Equal(m.lastVacuum):
		behind = now // past the threshold since now, as far as we know
	}
	if remember {
		m.behindSince, m.lastVacuum = behind, h.lastVacuum
	}
	switch {
	case h.dead < r.Threshold:
		r.Reason = "dead rows below the threshold"
		return r, false
	case h.vacuuming:
		r.Reason = "a vacuum of the table is running"
		return r, false
	case !h.autovacuum:
		r.Reason = "autovacuum is off for the task table"
		return r, true
	case now.Sub(behind) >= autovacuumLate:
		r.Reason = fmt.Sprintf("autovacuum left the dead rows past the threshold for %v", now.Sub(behind).Round(time.Second))
		return r, true
	}
	r.Reason = "autovacuum is on and due to vacuum the table"
	return r, false
}

var _ driver.Maintainer = (*Driver)(nil)
