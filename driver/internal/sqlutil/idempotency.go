package sqlutil

import (
	"bytes"
	"context"
	"fmt"

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

// GetRequest reads the keel_idempotency row of scope and key with query
// (state, digest, status, headers, body; nil when there is none): the Get
// step of RequestSteps on a database/sql driver.
func GetRequest(ctx context.Context, q Queryer, query, scope, key string) (*RequestRow, error) {
	rows, err := Collect(Query(ctx, q, query, scope, key), func(scan Scan) (*RequestRow, error) {
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
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return &rows[0], nil
}
