package sqlutil

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// RequestRow is what BeginRequest reads of a keel_idempotency row.
type RequestRow struct {
	State    string
	Digest   []byte
	Response driver.StoredResponse
}

// RequestSteps are one driver's statements for BeginRequest, each its own
// statement (no transaction, so concurrent begins never deadlock): insert
// reports whether it created the row, takeOver whether it took an expired
// row or an in-flight one whose lock ran out, get reads the row (nil: none).
type RequestSteps struct {
	Insert   func() (bool, error)
	TakeOver func() (bool, error)
	Get      func() (*RequestRow, error)
}

// BeginRequest runs s for p: insert, else take over, else read what holds
// the key. A row deleted between the steps (released or purged) makes it
// start again, a few times.
func BeginRequest(p driver.BeginRequestParams, s RequestSteps) (driver.BeginOutcome, *driver.StoredResponse, error) {
	for range 5 {
		ok, err := s.Insert()
		if err != nil {
			return 0, nil, err
		}
		if ok {
			return driver.BeginFirst, nil, nil
		}
		if ok, err = s.TakeOver(); err != nil {
			return 0, nil, err
		} else if ok {
			return driver.BeginFirst, nil, nil
		}
		row, err := s.Get()
		if err != nil {
			return 0, nil, err
		}
		if row == nil {
			continue
		}
		if !bytes.Equal(row.Digest, p.Digest) {
			return driver.BeginMismatch, nil, nil
		}
		switch driver.RequestState(row.State) {
		case driver.RequestInFlight:
			return driver.BeginInFlight, nil, nil
		case driver.RequestDone:
			resp := row.Response
			return driver.BeginDone, &resp, nil
		}
		return 0, nil, fmt.Errorf("%w: %q", driver.ErrBadRequestRow, row.State)
	}
	// The key kept vanishing under us: someone else is busy with it.
	return driver.BeginInFlight, nil, nil
}

// GetRequest reads the keel_idempotency row rows selects (state, digest,
// status, headers, body; nil when there is none): the Get step of
// RequestSteps.
func GetRequest(rows Rows) (*RequestRow, error) {
	return One(rows, func(scan Scan) (*RequestRow, error) {
		var r RequestRow
		var headers string
		if err := scan(&r.State, &r.Digest, &r.Response.Status, &headers, &r.Response.Body); err != nil {
			return nil, err
		}
		if headers != "" {
			r.Response.Headers = []byte(headers)
		}
		return &r, nil
	})
}

// RequestSQL are a driver's keel_idempotency statements, each taking its
// arguments in the order named: Insert (scope, key, digest, owner, now,
// expires, locked until), TakeOver (TakeOverArgs), Get (scope, key),
// Finish (status, headers, body, scope, key, owner), Release (scope, key,
// owner) and Purge (before).
type RequestSQL struct {
	Insert, TakeOver, Get, Finish, Release, Purge string
	// TakeOverArgs are TakeOver's arguments for p with its times as the
	// database stores them.
	TakeOverArgs func(p driver.BeginRequestParams, now, expires, lockedUntil any) []any
}

// BeginRequest implements driver.IdempotencyStore: each step its own
// statement (see RequestSteps).
func (o *Ops[Q]) BeginRequest(ctx context.Context, p driver.BeginRequestParams) (driver.BeginOutcome, *driver.StoredResponse, error) {
	if err := p.Validate(); err != nil {
		return 0, nil, err
	}
	s, db := o.c.SQL.Requests, o.c.DB
	now, expires, locked := db.Time(p.Now.UTC()), db.Time(p.Now.UTC().Add(p.TTL)), db.Time(p.Now.UTC().Add(p.Lock))
	affected := func(query string, args ...any) (bool, error) {
		n, err := db.exec(ctx, db.Do, query, args...)
		return n == 1, err
	}
	out, resp, err := BeginRequest(p, RequestSteps{
		Insert: func() (bool, error) {
			return affected(s.Insert, p.Scope, p.Key, p.Digest, p.Owner, now, expires, locked)
		},
		TakeOver: func() (bool, error) { return affected(s.TakeOver, s.TakeOverArgs(p, now, expires, locked)...) },
		Get:      func() (*RequestRow, error) { return GetRequest(db.pool().Rows(ctx, s.Get, p.Scope, p.Key)) },
	})
	if err != nil {
		return 0, nil, fmt.Errorf("begin request %s %q: %w", p.Scope, p.Key, err)
	}
	return out, resp, nil
}

// FinishRequest implements driver.IdempotencyStore. An empty body is
// stored empty, not NULL.
func (o *Ops[Q]) FinishRequest(ctx context.Context, p driver.FinishRequestParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	body := p.Response.Body
	if body == nil {
		body = []byte{}
	}
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Requests.Finish, p.Response.Status, string(p.Response.Headers), body,
		p.Scope, p.Key, p.Owner)
	if err != nil {
		return false, fmt.Errorf("finish request %s %q: %w", p.Scope, p.Key, err)
	}
	return n == 1, nil
}

// ReleaseRequest implements driver.IdempotencyStore.
func (o *Ops[Q]) ReleaseRequest(ctx context.Context, scope, key, owner string) (bool, error) {
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Requests.Release, scope, key, owner)
	if err != nil {
		return false, fmt.Errorf("release request %s %q: %w", scope, key, err)
	}
	return n == 1, nil
}

// PurgeRequests implements driver.IdempotencyStore.
func (o *Ops[Q]) PurgeRequests(ctx context.Context, before time.Time) (int64, error) {
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Requests.Purge, o.c.DB.Time(before.UTC()))
	if err != nil {
		return 0, fmt.Errorf("purge idempotent requests: %w", err)
	}
	return n, nil
}
