package main

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/chaos/lastrun"
)

// The checks of keel doctor, one function each, in seed 000 §4.2's order.

func roundTrip(r checkResult, where string, rtt time.Duration, err error) checkResult {
	switch {
	case err != nil:
		r.Status, r.Detail, r.Hint = statusFail, where+": "+oneLine(err.Error(), 300), "check that the database server runs and answers"
	case rtt > doctorSlowRoundTrip:
		r.Status, r.Detail = statusWarn, fmt.Sprintf("%s: round trip %s", where, short(rtt))
		r.Hint = "slow: check the network path and the database server's load"
	default:
		r.Status, r.Detail = statusOK, fmt.Sprintf("%s: round trip %s", where, short(rtt))
	}
	return r
}

func errCheck(name string, err error) checkResult {
	return checkResult{Check: name, Status: statusFail, Detail: oneLine(err.Error(), 300), Hint: "the database answered other calls: see its log"}
}

// migrationCheck compares the versions applied before doctor opened the
// database (applied) with every version this keel knows; opening applied
// the rest.
func migrationCheck(ctx context.Context, drv driver.Driver, applied int) checkResult {
	r := checkResult{Check: "migrations"}
	m, ok := drv.(driver.Migrator)
	if !ok {
		r.Status, r.Detail = statusSkip, "this driver does not report migrations"
		return r
	}
	all, err := m.Migrations(ctx)
	if err != nil {
		return errCheck("migrations", err)
	}
	if len(all) == 0 {
		r.Status, r.Detail = statusSkip, "no migrations"
		return r
	}
	last := all[len(all)-1]
	if applied > len(all) {
		r.Status = statusWarn
		r.Detail = fmt.Sprintf("the database has %d versions, this keel knows %d (latest %s)", applied, len(all), last.Name)
		r.Hint = "a newer keel migrated it: run doctor from that version"
		return r
	}
	if applied == len(all) {
		r.Status, r.Detail = statusOK, fmt.Sprintf("%d versions, latest %s", len(all), last.Name)
		return r
	}
	var names []string
	for _, mg := range all[min(applied, len(all)):] {
		names = append(names, mg.Name)
	}
	r.Status = statusWarn
	r.Detail = fmt.Sprintf("%d of %d versions were pending (%s); opening the database applied them", len(names), len(all), strings.Join(names, ", "))
	r.Hint = "processes started before may run an older keel: upgrade and restart them; run keel migrate when deploying"
	return r
}

// serverRow runs the PostgreSQL (pg) or MySQL (my) form of a one-row
// query, as dsn names the database, on drv's SQL handle. On SQLite, or a
// driver without a handle, it marks r n/a (sqliteWhy says why on SQLite)
// and returns false.
func serverRow(ctx context.Context, drv driver.Driver, dsn string, r *checkResult, sqliteWhy, pg, my string) (*sql.Row, bool) {
	q := my
	switch {
	case isPostgresDSN(dsn):
		q = pg
	case !isMySQLDSN(dsn):
		r.Status, r.Detail = statusSkip, sqliteWhy
		return nil, false
	}
	dber, ok := drv.(driver.DBer)
	if !ok {
		r.Status, r.Detail = statusSkip, "the driver has no SQL handle"
		return nil, false
	}
	return dber.DB().QueryRowContext(ctx, q), true
}

// clockCheck compares this machine's clock with the database's.
func clockCheck(ctx context.Context, drv driver.Driver, dsn string) checkResult {
	r := checkResult{Check: "clock skew"}
	start := time.Now()
	row, ok := serverRow(ctx, drv, dsn, &r, "SQLite uses this machine's clock",
		`SELECT extract(epoch FROM clock_timestamp())::float8`, `SELECT UNIX_TIMESTAMP(NOW(6))`)
	if !ok {
		return r
	}
	var secs float64
	if err := row.Scan(&secs); err != nil {
		return errCheck("clock skew", err)
	}
	rtt := time.Since(start)
	local := start.Add(rtt / 2)
	skew := time.Duration(secs*1e6)*time.Microsecond - time.Duration(local.UnixMicro())*time.Microsecond
	side := "ahead of"
	if skew < 0 {
		side = "behind"
	}
	r.Detail = fmt.Sprintf("the database clock is %s %s this machine's (±%s)", short(skew.Abs()), side, short(rtt/2))
	switch {
	case skew.Abs() > doctorSkewFail:
		r.Status = statusFail
	case skew.Abs() > doctorSkewWarn:
		r.Status = statusWarn
	default:
		r.Status = statusOK
	}
	if r.Status != statusOK {
		r.Hint = "sync the clocks (NTP/chrony) on every node and the database host: leases and node liveness compare them"
	}
	return r
}

// connectionsCheck compares the database server's open connections with
// its limit (PostgreSQL max_connections, MySQL max_connections): the
// resource every keel process's pool draws from. 80 % warns, 95 % fails.
func connectionsCheck(ctx context.Context, drv driver.Driver, dsn string) checkResult {
	r := checkResult{Check: "database connections"}
	row, ok := serverRow(ctx, drv, dsn, &r, "SQLite: one file, no server connections",
		`SELECT (SELECT count(*) FROM pg_stat_activity), current_setting('max_connections')::bigint`,
		`SELECT (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'THREADS_CONNECTED'),
	@@max_connections`)
	if !ok {
		return r
	}
	var used, limit int64
	if err := row.Scan(&used, &limit); err != nil {
		return errCheck("database connections", err)
	}
	r.Status, r.Detail = statusOK, fmt.Sprintf("%d of %d in use", used, limit)
	switch {
	case limit > 0 && used*100 >= limit*95:
		r.Status = statusFail
	case limit > 0 && used*100 >= limit*80:
		r.Status = statusWarn
	}
	if r.Status != statusOK {
		r.Hint = "lower the pools' sizes (postgres pool_max_conns, mysql MaxConns), add a pooler, or raise max_connections"
	}
	return r
}

type nodeFact struct {
	name      string
	heartbeat time.Time
}

func nodeCheck(nodes []nodeFact) checkResult {
	r := checkResult{Check: "nodes"}
	var alive int
	var lost []string
	for _, n := range nodes {
		if d := now().Sub(n.heartbeat); d > doctorLostAfter {
			lost = append(lost, fmt.Sprintf("%s (silent %s)", n.name, short(d)))
		} else {
			alive++
		}
	}
	r.Detail = fmt.Sprintf("%d alive, %d lost", alive, len(lost))
	if len(lost) > 0 {
		r.Detail += ": " + strings.Join(lost, ", ")
	}
	switch {
	case len(nodes) == 0:
		r.Status, r.Detail = statusWarn, "no worker process registered"
		r.Hint = "nothing works the tasks: start keel serve or your workers"
	case alive == 0:
		r.Status, r.Hint = statusFail, "no live worker process: start keel serve or your workers, and check the lost ones' hosts"
	case len(lost) > 0:
		r.Status = statusWarn
		r.Hint = "a process stopped without leaving (kill -9, OOM, host gone): check its host; its tasks return when their lease expires"
	default:
		r.Status = statusOK
	}
	return r
}

// expiredCheck asks the driver for running tasks whose lease expired.
func expiredCheck(ctx context.Context, drv driver.Driver) checkResult {
	rows, at, err := drv.ListExpired(ctx, driver.ExpiredParams{Now: time.Now(), Limit: 100})
	if err != nil {
		return errCheck("stuck tasks", err)
	}
	var ts []stuckFact
	for _, t := range rows {
		ts = append(ts, stuckFact{t.ID, t.Type, t.LeaseOwner, at.Sub(t.LeaseExpiresAt)})
	}
	return stuckCheck(ts, "lease expired")
}

type stuckFact struct {
	id        int64
	typ, node string
	past      time.Duration // how long past its lease
}

func stuckCheck(ts []stuckFact, what string) checkResult {
	r := checkResult{Check: "stuck tasks", Status: statusOK, Detail: "no running task past its lease"}
	if len(ts) == 0 {
		return r
	}
	slices.SortFunc(ts, func(a, b stuckFact) int { return cmp.Compare(b.past, a.past) })
	var names []string
	for _, t := range ts[:min(len(ts), 5)] {
		names = append(names, fmt.Sprintf("#%d %s on %s (%s %s ago)", t.id, t.typ, cmp.Or(t.node, "?"), what, short(t.past)))
	}
	r.Status = statusWarn
	if ts[0].past > doctorRescueSlack {
		r.Status = statusFail
	}
	r.Detail = fmt.Sprintf("%d running past their lease: %s", len(ts), strings.Join(names, ", "))
	r.Hint = "the leader's rescuer returns them to pending within seconds; if they stay, no keel process is running (keel nodes) or it cannot write: see its log"
	return r
}

type readyFact struct {
	queue  string
	age    time.Duration
	served bool
	ready  int64
}

func readyCheck(qs []readyFact) checkResult {
	r := checkResult{Check: "oldest ready", Status: statusOK, Detail: "no task ready"}
	var ready int64
	for _, q := range qs {
		ready += q.ready
	}
	if ready == 0 {
		return r
	}
	oldest := slices.MaxFunc(qs, func(a, b readyFact) int { return cmp.Compare(a.age, b.age) })
	if oldest.age == 0 {
		r.Detail = fmt.Sprintf("%d ready, all for under a minute", ready)
		return r
	}
	r.Detail = fmt.Sprintf("%d ready, the oldest for %s in queue %s", ready, short(oldest.age), oldest.queue)
	if oldest.age > doctorOldReady {
		r.Status = statusWarn
		r.Hint = "workers are too few or too slow: keel stats; add workers or raise the queue's concurrency"
		if !oldest.served {
			r.Hint = "no live worker works queue " + oldest.queue + ": start one that lists it"
		}
	}
	return r
}

type deadFact struct{ typ, err string }

func lastError(errs []keel.AttemptError) string {
	if len(errs) == 0 {
		return ""
	}
	msg, _, _ := strings.Cut(errs[len(errs)-1].Error, "\n")
	return oneLine(msg, 80)
}

func deadCheck(ds []deadFact) checkResult {
	r := checkResult{Check: "dead letters", Status: statusOK, Detail: "none in the last hour"}
	if len(ds) == 0 {
		return r
	}
	groups := map[deadFact]int{}
	for _, d := range ds {
		groups[d]++
	}
	keys := slices.Collect(func(yield func(deadFact) bool) {
		for k := range groups {
			if !yield(k) {
				return
			}
		}
	})
	slices.SortFunc(keys, func(a, b deadFact) int {
		return cmp.Or(cmp.Compare(groups[b], groups[a]), strings.Compare(a.typ, b.typ), strings.Compare(a.err, b.err))
	})
	var parts []string
	for _, k := range keys[:min(len(keys), 5)] {
		parts = append(parts, fmt.Sprintf("%d× %s %q", groups[k], k.typ, k.err))
	}
	if len(keys) > 5 {
		parts = append(parts, fmt.Sprintf("%d more groups", len(keys)-5))
	}
	more := ""
	if len(ds) >= 1000 {
		more = "at least "
	}
	r.Detail = fmt.Sprintf("%s%d in the last hour: %s", more, len(ds), strings.Join(parts, "; "))
	if len(ds) > keel.DefaultAlertRules().DeadPerHour {
		r.Status = statusWarn
	}
	r.Hint = fmt.Sprintf("keel dlq list --type %s --after 1h; fix the cause, then keel dlq requeue --type %s --after 1h", keys[0].typ, keys[0].typ)
	return r
}

func pausedCheck(queues, types []string) checkResult {
	r := checkResult{Check: "paused", Status: statusOK, Detail: "no queue or type paused"}
	var parts []string
	if len(queues) > 0 {
		parts = append(parts, "queues "+strings.Join(queues, ", "))
	}
	if len(types) > 0 {
		parts = append(parts, "types "+strings.Join(types, ", "))
	}
	if len(parts) > 0 {
		r.Status, r.Detail = statusWarn, strings.Join(parts, "; ")
		r.Hint = "their tasks wait: keel queue resume <name> / keel type resume <name> if that is not intended"
	}
	return r
}

// targetChecks dials each HTTP target of cfg (a TCP connect, no request).
func targetChecks(ctx context.Context, cfg *config.Config) []checkResult {
	if cfg == nil {
		return []checkResult{{Check: "http targets", Status: statusSkip, Detail: "no --config given"}}
	}
	var names []string
	for name, t := range cfg.Types {
		if t.IsTarget() {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return []checkResult{{Check: "http targets", Status: statusSkip, Detail: "no type with a url in " + cmp.Or(cfg.File, "the configuration")}}
	}
	slices.Sort(names)
	var rs []checkResult
	for _, name := range names {
		rs = append(rs, dialTarget(ctx, name, cfg.Types[name].URL))
	}
	return rs
}

func dialTarget(ctx context.Context, name, target string) checkResult {
	r := checkResult{Check: "target " + name}
	u, err := url.Parse(target)
	if err != nil || u.Hostname() == "" {
		r.Status, r.Detail = statusFail, fmt.Sprintf("bad url %q", target)
		return r
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		port = cmp.Or(port, "80")
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	ctx, cancel := context.WithTimeout(ctx, doctorDialTimeout)
	defer cancel()
	start := time.Now()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		r.Status, r.Detail = statusFail, fmt.Sprintf("%s: %s", addr, oneLine(err.Error(), 200))
		r.Hint = "its tasks fail and retry: start the service, or fix types." + name + ".url"
		return r
	}
	conn.Close()
	r.Status, r.Detail = statusOK, fmt.Sprintf("%s: connected in %s", addr, short(time.Since(start)))
	return r
}

// storageCheck reports the room left: free disk and WAL size on SQLite,
// the task table's size and dead space on PostgreSQL and MySQL.
func storageCheck(ctx context.Context, drv driver.Driver, dsn, schema string) checkResult {
	r := checkResult{Check: "storage", Status: statusOK}
	dber, _ := drv.(driver.DBer)
	switch {
	case isPostgresDSN(dsn) && dber != nil:
		var size int64
		err := dber.DB().QueryRowContext(ctx, `SELECT pg_total_relation_size(c.oid)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = 'keel_tasks'`, schema).Scan(&size)
		if err != nil {
			return errCheck("storage", err)
		}
		mc, ok := drv.(maintenanceChecker)
		if !ok {
			r.Detail = "keel_tasks " + bytesSize(size)
			return r
		}
		m, err := mc.CheckMaintenance(ctx)
		if err != nil {
			return errCheck("storage", err)
		}
		r.Detail = fmt.Sprintf("keel_tasks %s, %d live rows, %d dead (%.0f%% of live; a vacuum is due from %d)",
			bytesSize(size), m.LiveRows, m.DeadRows, 100*float64(m.DeadRows)/float64(max(m.LiveRows, 1)), m.Threshold)
		r.Status, r.Hint = judgeDeadRows(m, time.Now(), schema)
	case isMySQLDSN(dsn) && dber != nil:
		var data, free int64
		err := dber.DB().QueryRowContext(ctx, `SELECT data_length + index_length, data_free FROM information_schema.TABLES
			WHERE table_schema = DATABASE() AND table_name = 'keel_tasks'`).Scan(&data, &free)
		if err != nil {
			return errCheck("storage", err)
		}
		r.Detail = fmt.Sprintf("keel_tasks %s, %s free inside", bytesSize(data), bytesSize(free))
		if free > data && free > 64<<20 {
			r.Status, r.Hint = statusWarn, "much unused space: OPTIMIZE TABLE keel_tasks at a quiet time"
		}
	case !isPostgresDSN(dsn) && !isMySQLDSN(dsn):
		dir := filepath.Dir(dsn)
		var fs syscall.Statfs_t
		if err := syscall.Statfs(dir, &fs); err != nil {
			return errCheck("storage", err)
		}
		free := int64(fs.Bavail) * int64(fs.Bsize)
		var wal int64
		if fi, err := os.Stat(dsn + "-wal"); err == nil {
			wal = fi.Size()
		}
		r.Detail = fmt.Sprintf("%s free in %s, WAL %s", bytesSize(free), dir, bytesSize(wal))
		switch {
		case free < doctorFreeFail:
			r.Status, r.Hint = statusFail, "the disk is nearly full: writes will fail; free space or move the database"
		case free < doctorFreeWarn:
			r.Status, r.Hint = statusWarn, "less than 1 GiB free: free space or move the database"
		case wal > doctorWALWarn:
			r.Status, r.Hint = statusWarn, "the WAL cannot be checkpointed: look for a long-lived reader of the file"
		}
	default:
		r.Status, r.Detail = statusSkip, "the driver has no SQL handle"
	}
	return r
}

// maintenanceChecker is the PostgreSQL driver's reading of the task
// table's statistics, as its leader's upkeep judges them.
type maintenanceChecker interface {
	CheckMaintenance(ctx context.Context) (driver.MaintainReport, error)
}

// autovacuumLate is how long after the last vacuum dead rows past the
// threshold make an enabled autovacuum late (the leader's upkeep waits as
// long before it vacuums itself).
const autovacuumLate = 5 * time.Minute

// judgeDeadRows is doctor's rule for the task table's dead row versions on
// PostgreSQL. Below the vacuum threshold (1,000 plus 1 % of the live rows,
// where keel's leader or autovacuum vacuums) they are fine whatever their
// share of the live rows: a small table's dead rows cost nothing. Past it,
// with a vacuum running, also fine. Past it, it warns when autovacuum is off
// for the table (only keel's leader then vacuums it: is one running?) or
// late (no vacuum for 5 minutes).
func judgeDeadRows(m driver.MaintainReport, now time.Time, schema string) (status, hint string) {
	vacuum := fmt.Sprintf("VACUUM (ANALYZE) %s.keel_tasks", schema)
	switch {
	case m.DeadRows < m.Threshold || m.Vacuuming:
		return statusOK, ""
	case !m.Autovacuum:
		return statusWarn, "dead rows past the vacuum threshold and autovacuum is off for keel_tasks: keel's leader vacuums it (is a keel serve or a started client running?); or run " + vacuum
	case m.LastVacuum.IsZero() || now.Sub(m.LastVacuum) >= autovacuumLate:
		return statusWarn, "dead rows past the vacuum threshold and no vacuum for 5 minutes: autovacuum is late; look for long transactions, or run " + vacuum
	}
	return statusOK, ""
}

func bytesSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// poolCheck judges a process's connection pool from two readings taken
// sample apart: full with callers waiting fails; 80 % in use, or callers
// waiting a notable share of the sample, warns.
func poolCheck(before, after driver.PoolStats, sample time.Duration) checkResult {
	r := checkResult{Check: "connection pool", Status: statusOK}
	waits := after.WaitCount - before.WaitCount
	waited := after.WaitDuration - before.WaitDuration
	recent := fmt.Sprintf("%d in the last %s", waits, short(sample))
	if waited > 0 { // PostgreSQL does not time the waits given up
		recent += " (" + short(waited) + ")"
	}
	r.Detail = fmt.Sprintf("%d of %d in use, %d idle; waits for a connection: %s, %d since start (%s in all)",
		after.InUse, after.Max, after.Idle, recent, after.WaitCount, short(after.WaitDuration))
	full := after.Max > 0 && after.InUse >= after.Max
	switch {
	case full && waits > 0:
		r.Status = statusFail
	case after.Max > 0 && after.InUse*100 >= after.Max*doctorPoolWarnPct,
		waits > 0 && waited*100 >= sample*doctorPoolWaitPct:
		r.Status = statusWarn
	}
	if r.Status != statusOK {
		r.Hint = "tasks and API calls wait for a connection: raise the pool's size, set by " + cmp.Or(after.MaxSetting, "the driver's options") +
			", within the database's max_connections; or lower the workers' concurrency; look for long transactions holding connections"
	}
	return r
}

// chaosCheck reports the last keel chaos run recorded in keel_meta (rec,
// nil when none was recorded): when it ran and its verdict; with none,
// the command that proves the crash promises on this setup (run).
func chaosCheck(rec *lastrun.Record, err error, run string) checkResult {
	r := checkResult{Check: "chaos"}
	switch {
	case err != nil:
		r.Status, r.Detail = statusSkip, oneLine(err.Error(), 200)
	case rec == nil:
		r.Status, r.Detail = statusSkip, "no keel chaos run recorded"
		r.Hint = run + ": crash workers on purpose against this database and check nothing is lost, applied twice or stuck"
	case rec.Verdict != lastrun.Pass:
		r.Status = statusWarn
		r.Detail = fmt.Sprintf("the last run (%s, on %s) failed: %s", rec.At.UTC().Format("2006-01-02 15:04 UTC"), rec.Database, strings.Join(rec.Failed, ", "))
		r.Hint = run + " again and read the failures; a failure breaks keel's promises"
	default:
		r.Status = statusOK
		n := len(rec.Scenarios) - len(rec.Skipped)
		r.Detail = fmt.Sprintf("the last run (%s, on %s) passed: %d scenario", rec.At.UTC().Format("2006-01-02 15:04 UTC"), rec.Database, n)
		if n != 1 {
			r.Detail += "s"
		}
		if len(rec.Skipped) > 0 {
			r.Detail += ", " + strings.Join(rec.Skipped, ", ") + " skipped"
		}
	}
	return r
}
