package mysql

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
		state                                  string
		idemKey, owner                         sql.NullString
		timeoutMS                              int64
		leaseExp, started, attempted, finished sql.NullTime
		errs                                   []byte
	)
	err := s.Scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Payload, &state, &r.Attempt, &r.MaxAttempts,
		&r.Fence, &r.RunAt, &timeoutMS, &idemKey, &r.PayloadDigest, &owner, &leaseExp, &r.CreatedAt, &started,
		&attempted, &finished, &r.UpdatedAt, &errs, &r.Result, &r.Meta)
	if err != nil {
		return nil, err
	}
	r.State = driver.State(state)
	r.Timeout = time.Duration(timeoutMS) * time.Millisecond
	r.IdemKey, r.LeaseOwner = idemKey.String, owner.String
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

// scanTasks reads every row of rows and closes it.
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

// scanIDs reads a single column of ids and closes rows.
func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func optTime(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
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
