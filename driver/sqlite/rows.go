package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

type scanner interface {
	Scan(dest ...any) error
}

// scanTask reads one row selected with taskColumns.
func scanTask(s scanner) (*driver.TaskRow, error) {
	var (
		r                                      driver.TaskRow
		payload, errs                          string
		idemKey, owner, result, meta           sql.NullString
		runAt, createdAt, updatedAt, timeoutMS int64
		leaseExp, started, attempted, finished sql.NullInt64
		state                                  string
	)
	err := s.Scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &payload, &state, &r.Attempt, &r.MaxAttempts,
		&r.Fence, &runAt, &timeoutMS, &idemKey, &r.PayloadDigest, &owner, &leaseExp, &createdAt, &started,
		&attempted, &finished, &updatedAt, &errs, &result, &meta)
	if err != nil {
		return nil, err
	}
	r.Payload = []byte(payload)
	r.State = driver.State(state)
	r.RunAt = fromMicros(runAt)
	r.Timeout = time.Duration(timeoutMS) * time.Millisecond
	r.IdemKey = idemKey.String
	r.LeaseOwner = owner.String
	r.LeaseExpiresAt = optTime(leaseExp)
	r.CreatedAt = fromMicros(createdAt)
	r.StartedAt = optTime(started)
	r.AttemptedAt = optTime(attempted)
	r.FinishedAt = optTime(finished)
	r.UpdatedAt = fromMicros(updatedAt)
	if result.Valid {
		r.Result = []byte(result.String)
	}
	if meta.Valid {
		r.Meta = []byte(meta.String)
	}
	if errs != "" && errs != "[]" {
		if err := json.Unmarshal([]byte(errs), &r.Errors); err != nil {
			return nil, fmt.Errorf("task %d: decode error history: %w", r.ID, err)
		}
	}
	return &r, nil
}

func scanTasks(rows *sql.Rows, out []driver.TaskRow) ([]driver.TaskRow, error) {
	defer rows.Close()
	for rows.Next() {
		r, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

func optTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
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
