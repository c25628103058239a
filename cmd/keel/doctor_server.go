package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/chaos/lastrun"
	"github.com/keelq/keel/server"
)

// doctorServer runs the checks through keel serve's API. It stops after
// the first check when the server or its database does not answer.
func doctorServer(ctx context.Context, api *apiClient) []checkResult {
	dbCheck := checkResult{Check: "database"}
	start := time.Now()
	_, err := api.do(ctx, http.MethodGet, "/readyz", nil, nil)
	rtt := time.Since(start)
	if err != nil {
		dbCheck.Status, dbCheck.Detail = statusFail, oneLine(err.Error(), 300)
		dbCheck.Hint = "start keel serve or fix --server; if the server answers, check its database"
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
			dbCheck.Hint = "the server cannot reach its database: check the database server, then keel doctor --dsn"
			// A full pool is one cause; the server reports it without a
			// database query.
			at := time.Now()
			sys, err := api.system(ctx)
			pool := serverPool(ctx, api, at, sys, err)
			if pool.Status == statusFail {
				dbCheck.Hint = "the server's connection pool is full (next line): its database calls wait for a connection and time out"
			}
			return []checkResult{dbCheck, pool}
		}
		return []checkResult{dbCheck}
	}
	rs := []checkResult{roundTrip(dbCheck, "via "+api.base, rtt, nil),
		{Check: "migrations", Status: statusSkip, Detail: "the server applied them at its start; keel doctor --dsn compares"},
		{Check: "clock skew", Status: statusSkip, Detail: "needs the database: keel doctor --dsn"},
		{Check: "database connections", Status: statusSkip, Detail: "needs the database: keel doctor --dsn"},
	}
	poolAt := time.Now()
	poolBefore, poolErr := api.system(ctx)
	if l, _, err := api.nodes(ctx); err != nil {
		rs = append(rs, errCheck("nodes", err))
	} else {
		var ns []nodeFact
		for _, n := range l.Nodes {
			ns = append(ns, nodeFact{n.Name, n.HeartbeatAt})
		}
		rs = append(rs, nodeCheck(ns))
	}
	// The API does not show leases: a running task is past its lease at
	// the latest when its timeout and a default LeaseTTL have passed since
	// the attempt started.
	if l, err := api.list(ctx, "/v1/tasks", url.Values{"state": {"running"}, "limit": {"1000"}}); err != nil {
		rs = append(rs, errCheck("stuck tasks", err))
	} else {
		var ts []stuckFact
		for _, t := range l.Tasks {
			if t.AttemptedAt == nil {
				continue
			}
			if past := now().Sub(t.AttemptedAt.Add(time.Duration(t.Timeout) + doctorLeaseTTL)); past > 0 {
				ts = append(ts, stuckFact{t.ID, t.Type, t.Node, past})
			}
		}
		rs = append(rs, stuckCheck(ts, "timeout and lease over"))
	}
	if s, _, err := api.stats(ctx); err != nil {
		rs = append(rs, errCheck("oldest ready", err))
	} else {
		var qs []readyFact
		for _, q := range s.Queues {
			qs = append(qs, readyFact{q.Name, time.Duration(q.OldestReadyAge), q.Served, q.Views[string(keel.ViewReady)]})
		}
		rs = append(rs, readyCheck(qs))
	}
	after := now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	if l, err := api.list(ctx, "/v1/dead", url.Values{"finished_after": {after}, "limit": {"1000"}}); err != nil {
		rs = append(rs, errCheck("dead letters", err))
	} else {
		var ds []deadFact
		for _, t := range l.Tasks {
			var last string
			if len(t.Errors) > 0 {
				last, _, _ = strings.Cut(t.Errors[len(t.Errors)-1].Error, "\n")
			}
			ds = append(ds, deadFact{t.Type, oneLine(last, 80)})
		}
		rs = append(rs, deadCheck(ds))
	}
	var pq, pt []string
	ql, _, err := api.queues(ctx)
	if err == nil {
		for _, q := range ql.Queues {
			if q.Paused {
				pq = append(pq, q.Name)
			}
		}
		var tl server.TypeList
		tl, _, err = api.types(ctx)
		for _, t := range tl.Types {
			if t.Paused {
				pt = append(pt, t.Name)
			}
		}
	}
	if err != nil {
		rs = append(rs, errCheck("paused", err))
	} else {
		rs = append(rs, pausedCheck(pq, pt))
	}
	rs = append(rs, serverPool(ctx, api, poolAt, poolBefore, poolErr))
	rs = append(rs, checkResult{Check: "storage", Status: statusSkip, Detail: "needs the database: keel doctor --dsn or --db"})
	var rec *lastrun.Record
	if poolErr == nil && poolBefore.Chaos != nil {
		c := poolBefore.Chaos
		rec = &lastrun.Record{At: c.At, Verdict: c.Verdict, Database: c.Database, Scenarios: c.Scenarios, Failed: c.Failed, Skipped: c.Skipped}
	}
	return append(rs, chaosCheck(rec, nil, "keel chaos --dsn URL (or --db FILE) on the server's database"))
}

// serverPool reads keel serve's connection pool again, doctorPoolSample
// after the reading taken at 'at' (before, err), and judges the two.
func serverPool(ctx context.Context, api *apiClient, at time.Time, before server.System, err error) checkResult {
	r := checkResult{Check: "connection pool", Status: statusSkip}
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		r.Detail = "the server does not report its pool (a keel serve older than this keel)"
		return r
	case err != nil:
		return errCheck("connection pool", err)
	case before.Pool == nil:
		r.Detail = "the server's storage driver does not report its pool"
		return r
	}
	select {
	case <-time.After(time.Until(at.Add(doctorPoolSample))):
	case <-ctx.Done():
		return errCheck("connection pool", ctx.Err())
	}
	sample := time.Since(at)
	after, err := api.system(ctx)
	if err != nil {
		return errCheck("connection pool", err)
	}
	if after.Pool == nil {
		r.Detail = "the server's storage driver does not report its pool"
		return r
	}
	return poolCheck(poolStats(*before.Pool), poolStats(*after.Pool), sample)
}

func poolStats(p server.Pool) driver.PoolStats {
	return driver.PoolStats{InUse: p.InUse, Idle: p.Idle, Max: p.Max, WaitCount: p.WaitCount,
		WaitDuration: time.Duration(p.WaitDuration), MaxSetting: p.MaxSetting}
}
