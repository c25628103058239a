package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Idempotent HTTP requests (keel_idempotency, used by package
// keel/idempotency): a request carrying an Idempotency-Key runs once per
// scope and key; its response is stored for replay until the row expires.
// The table is unrelated to the tasks' idempotency keys.

// RequestState is the state of a stored idempotent request.
type RequestState string

// The states of an idempotent request's row.
const (
	// RequestInFlight: the first request holds the key and its handler
	// runs (until locked_until, after which another may take it over).
	RequestInFlight RequestState = "in_flight"
	// RequestDone: the response is stored for replay.
	RequestDone RequestState = "done"
)

// BeginOutcome is what BeginRequest found.
type BeginOutcome int

// The outcomes of BeginRequest.
const (
	// BeginFirst: the caller now holds the key and must run the request,
	// then FinishRequest or ReleaseRequest with its Owner.
	BeginFirst BeginOutcome = iota + 1
	// BeginInFlight: another request with the same key and digest runs.
	BeginInFlight
	// BeginDone: the request ran; the stored response comes with it.
	BeginDone
	// BeginMismatch: the key is held (in flight or done) by a request
	// with another digest.
	BeginMismatch
)

// String names the outcome.
func (o BeginOutcome) String() string {
	switch o {
	case BeginFirst:
		return "first"
	case BeginInFlight:
		return "in_flight"
	case BeginDone:
		return "done"
	case BeginMismatch:
		return "mismatch"
	}
	return fmt.Sprintf("BeginOutcome(%d)", int(o))
}

// StoredResponse is a finished request's response as stored.
type StoredResponse struct {
	Status int
	// Headers is a JSON object of header name to values, as given to
	// FinishRequest; the driver stores it unread.
	Headers []byte
	Body    []byte
}

// BeginRequestParams begins the request Key in Scope. A new row (or one
// that expired, or an in-flight one with the same digest whose lock ran
// out) becomes in flight for Owner until Now+Lock, and expires at Now+TTL.
type BeginRequestParams struct {
	Scope  string
	Key    string
	Digest []byte // SHA-256 of the request, 32 bytes
	Owner  string // random per attempt: FinishRequest and ReleaseRequest check it
	Now    time.Time
	TTL    time.Duration
	Lock   time.Duration
}

// Validate rejects params no driver stores: Scope and Key 1..255 bytes,
// Digest 32 bytes, Owner 1..64 bytes, TTL and Lock positive, Lock at most
// TTL.
func (p BeginRequestParams) Validate() error {
	if err := validateRequestKey("begin request", p.Scope, p.Key, p.Owner); err != nil {
		return err
	}
	switch {
	case len(p.Digest) != 32:
		return fmt.Errorf("begin request: digest must be 32 bytes, got %d", len(p.Digest))
	case p.TTL <= 0 || p.Lock <= 0:
		return fmt.Errorf("begin request: ttl %v and lock %v must be positive", p.TTL, p.Lock)
	case p.Lock > p.TTL:
		return fmt.Errorf("begin request: lock %v longer than ttl %v", p.Lock, p.TTL)
	}
	return nil
}

// FinishRequestParams stores the response of the request Key in Scope that
// Owner began; it applies only while the row is in flight for Owner.
type FinishRequestParams struct {
	Scope    string
	Key      string
	Owner    string
	Response StoredResponse
}

// Validate rejects params no driver stores: a status outside 100..599, a
// bad scope, key or owner.
func (p FinishRequestParams) Validate() error {
	if err := validateRequestKey("finish request", p.Scope, p.Key, p.Owner); err != nil {
		return err
	}
	if p.Response.Status < 100 || p.Response.Status > 599 {
		return fmt.Errorf("finish request: status %d out of 100..599", p.Response.Status)
	}
	return nil
}

func validateRequestKey(what, scope, key, owner string) error {
	switch {
	case len(scope) == 0 || len(scope) > 255:
		return fmt.Errorf("%s: scope must be 1..255 bytes, got %d", what, len(scope))
	case len(key) == 0 || len(key) > 255:
		return fmt.Errorf("%s: key must be 1..255 bytes, got %d", what, len(key))
	case len(owner) == 0 || len(owner) > 64:
		return fmt.Errorf("%s: owner must be 1..64 bytes, got %d", what, len(owner))
	}
	return nil
}

// ErrBadRequestRow is returned by BeginRequest when a row it read holds an
// unknown state.
var ErrBadRequestRow = errors.New("idempotent request row in an unknown state")

// IdempotencyStore is implemented by drivers that store idempotent HTTP
// requests (every keel driver). Package idempotency discovers it with a
// type assertion, so the Driver interface does not grow.
type IdempotencyStore interface {
	// BeginRequest takes the key (BeginFirst) or reports who holds it;
	// with BeginDone it returns the stored response. Of concurrent
	// begins of one new key, exactly one gets BeginFirst.
	BeginRequest(ctx context.Context, p BeginRequestParams) (BeginOutcome, *StoredResponse, error)
	// FinishRequest stores the response and reports whether it applied
	// (false: the row is no longer in flight for Owner).
	FinishRequest(ctx context.Context, p FinishRequestParams) (bool, error)
	// ReleaseRequest deletes the row in flight for owner, so that a retry
	// runs, and reports whether it did.
	ReleaseRequest(ctx context.Context, scope, key, owner string) (bool, error)
	// PurgeRequests deletes the rows that expired at or before before and
	// returns how many.
	PurgeRequests(ctx context.Context, before time.Time) (int64, error)
}
