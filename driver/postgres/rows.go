package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// scanTask reads one row selected with taskColumns.
func scanTask(scan func(dest ...any) error) (*driver.TaskRow, error) {
	var (
		r                                      driver.TaskRow
		state                                  string
		idemKey, owner                         *string
		timeoutMS                              int64
		leaseExp, started, attempted, finished *time.Time
		errs                                   []byte
	)
	err := scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Payload, &state, &r.Attempt, &r.MaxAttempts,
		&r.Fence, &r.RunAt, &timeoutMS, &idemKey, &r.PayloadDigest, &owner, &leaseExp, &r.CreatedAt, &started,
		&attempted, &finished, &r.UpdatedAt, &errs, &r.Result, &r.Meta)
	if err != nil {
		return nil, err
	}
	r.State = driver.State(state)
	r.Timeout = time.Duration(timeoutMS) * time.Millisecond
	if idemKey != nil {
		r.IdemKey = *idemKey
	}
	if owner != nil {
		r.LeaseOwner = *owner
	}
	r.RunAt, r.CreatedAt, r.UpdatedAt = r.RunAt.UTC(), r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	r.LeaseExpiresAt, r.StartedAt = optTime(leaseExp), optTime(started)
	r.AttemptedAt, r.FinishedAt = optTime(attempted), optTime(finished)
	if len(errs) > 0 && string(errs) != "[]" {
		if err := json.Unmarshal(errs, &r.Errors); err != nil {
			return nil, fmt.Errorf("task %d: decode error history: %w", r.ID, err)
		}
	}
	return &r, nil
}

func optTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
