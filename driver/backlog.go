package driver

import (
	"context"
	"fmt"
)

// BacklogStore is implemented by drivers that keep the backlog's peak per
// minute and can say where the history starts (every keel driver). The
// Client discovers it with a type assertion, so the Driver interface does
// not grow.
//
// The history (MinuteRow) counts what happened in a minute, not how many
// tasks waited: a burst that arrives and drains within one minute leaves
// no trace in its pending count at the minute's end. The leader samples
// the pending count every few seconds and keeps the largest seen in each
// minute here (keel_backlog).
type BacklogStore interface {
	// RecordBacklog raises the stored peak of s.Minute to s.Pending (the
	// larger of the two stays) and deletes the peaks of minutes before
	// s.DropBefore (0: none); a sample that fails Validate writes nothing.
	RecordBacklog(ctx context.Context, s BacklogSample) error
	// BacklogPeaks returns the stored peaks of the minutes from minute
	// since (Unix seconds / 60) on, oldest first.
	BacklogPeaks(ctx context.Context, since int64) ([]BacklogPeak, error)
	// FirstMinute returns the earliest minute the history (keel_minutes)
	// still holds, through the table's primary key; ok is false when it
	// holds none.
	FirstMinute(ctx context.Context) (minute int64, ok bool, err error)
}

// BacklogSample is one sample of the pending tasks (every queue's ready,
// scheduled and retrying tasks) in minute Minute (Unix seconds / 60).
type BacklogSample struct {
	Minute, Pending int64
	// DropBefore deletes the peaks of the minutes before it; 0: none.
	DropBefore int64
}

// Validate rejects a sample no driver stores.
func (s BacklogSample) Validate() error {
	switch {
	case s.Minute <= 0:
		return fmt.Errorf("backlog sample: minute must be positive, got %d", s.Minute)
	case s.Pending < 0:
		return fmt.Errorf("backlog sample: pending must not be negative, got %d", s.Pending)
	case s.DropBefore < 0 || s.DropBefore > s.Minute:
		return fmt.Errorf("backlog sample: drop_before must be in 0..%d, got %d", s.Minute, s.DropBefore)
	}
	return nil
}

// BacklogPeak is the most pending tasks sampled in one minute.
type BacklogPeak struct {
	Minute, Pending int64
}
