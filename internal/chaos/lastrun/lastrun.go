// Package lastrun keeps the record of the last keel chaos run in a keel
// database's keel_meta: its date, its verdict and the scenarios it ran.
// keel chaos writes it; keel doctor and GET /v1/system read it. It is a
// leaf, so the server reads the record without importing the runner.
package lastrun

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// MetaName is the keel_meta document holding the record.
const MetaName = "chaos.last_run"

// Verdicts of a run.
const (
	Pass = "pass"
	Fail = "fail"
)

// Record is the last run: when it ended, on what, and what it found.
type Record struct {
	// At is when the run ended, UTC.
	At time.Time `json:"at"`
	// Verdict is Pass when every scenario that ran passed, else Fail.
	Verdict string `json:"verdict"`
	// Database names the kind of database the run used (sqlite,
	// postgres, mariadb).
	Database string `json:"database"`
	// Scenarios are the scenarios that ran; Failed those that failed and
	// Skipped those that did not apply.
	Scenarios []string `json:"scenarios"`
	Failed    []string `json:"failed,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
	// Version is the keel version that ran it.
	Version string `json:"version,omitempty"`
}

// Store is what the record needs of a driver: its keel_meta.
type Store interface {
	GetMeta(ctx context.Context, name string) ([]byte, error)
	PutMeta(ctx context.Context, name string, value []byte, now time.Time) error
}

// Load returns the recorded run, or nil when none was recorded.
func Load(ctx context.Context, s Store) (*Record, error) {
	b, err := s.GetMeta(ctx, MetaName)
	if err != nil {
		return nil, fmt.Errorf("read the last chaos run: %w", err)
	}
	if b == nil {
		return nil, nil
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode the last chaos run: %w", err)
	}
	return &r, nil
}

// Save stores r as the last run, replacing the one before.
func Save(ctx context.Context, s Store, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.PutMeta(ctx, MetaName, b, r.At); err != nil {
		return fmt.Errorf("record the chaos run: %w", err)
	}
	return nil
}
