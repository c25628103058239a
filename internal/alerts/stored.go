package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// RulesMeta is the keel_meta document holding the rules set at runtime
// (keel.Client.SetAlertRules).
const RulesMeta = "alert_rules"

// storedRules is Rules as stored: durations as strings.
type storedRules struct {
	DeadPerHour        int     `json:"dead_per_hour"`
	OldestReadyAge     string  `json:"oldest_ready_age"`
	FailureRatio       float64 `json:"failure_ratio"`
	FailureMinAttempts int     `json:"failure_min_attempts"`
	FailureWindow      string  `json:"failure_window"`
	NoLiveWorker       bool    `json:"no_live_worker"`
	NodeLost           bool    `json:"node_lost"`
}

// encodeRules returns r as the RulesMeta document stores it.
func encodeRules(r Rules) []byte {
	raw, _ := json.Marshal(storedRules{DeadPerHour: r.DeadPerHour, OldestReadyAge: r.OldestReadyAge.String(),
		FailureRatio: r.FailureRatio, FailureMinAttempts: r.FailureMinAttempts, FailureWindow: r.FailureWindow.String(),
		NoLiveWorker: r.NoLiveWorker, NodeLost: r.NodeLost})
	return raw
}

// decodeRules reads a RulesMeta document.
func decodeRules(raw []byte) (Rules, error) {
	var s storedRules
	if err := json.Unmarshal(raw, &s); err != nil {
		return Rules{}, fmt.Errorf("keel: stored alert rules are not valid: %w", err)
	}
	r := Rules{DeadPerHour: s.DeadPerHour, FailureRatio: s.FailureRatio, FailureMinAttempts: s.FailureMinAttempts,
		NoLiveWorker: s.NoLiveWorker, NodeLost: s.NodeLost}
	var err error
	if r.OldestReadyAge, err = time.ParseDuration(s.OldestReadyAge); err == nil {
		r.FailureWindow, err = time.ParseDuration(s.FailureWindow)
	}
	if err != nil {
		return Rules{}, fmt.Errorf("keel: stored alert rules are not valid: %w", err)
	}
	return r, nil
}

// MetaStore is what a RuleStore needs of a driver: its keel_meta
// documents.
type MetaStore interface {
	GetMeta(ctx context.Context, name string) ([]byte, error)
	PutMeta(ctx context.Context, name string, value []byte, now time.Time) error
}

// RuleStore reads and writes the rules set at runtime, which replace the
// configured ones in every process until reset (keel.Client.AlertRules,
// SetAlertRules and ResetAlertRules, whose errors it returns).
type RuleStore struct {
	Meta MetaStore
	// Configured are the rules in force while none are set at runtime.
	Configured Rules
	Now        func() time.Time
	// Wrap classifies the store's errors (ErrUnavailable when the
	// database could not be reached).
	Wrap func(ctx context.Context, err error) error
}

// Load returns the rules in force: those set at runtime when there are
// (runtime true), else Configured.
func (s RuleStore) Load(ctx context.Context) (r Rules, runtime bool, err error) {
	raw, err := s.Meta.GetMeta(ctx, RulesMeta)
	if err != nil {
		return Rules{}, false, fmt.Errorf("keel: read alert rules: %w", s.Wrap(ctx, err))
	}
	if raw == nil {
		return s.Configured, false, nil
	}
	r, err = decodeRules(raw)
	return r, err == nil, err
}

// Set stores r as the rules in force; invalid rules are refused and
// nothing is stored.
func (s RuleStore) Set(ctx context.Context, r Rules) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := s.Meta.PutMeta(ctx, RulesMeta, encodeRules(r), s.Now()); err != nil {
		return fmt.Errorf("keel: store alert rules: %w", s.Wrap(ctx, err))
	}
	return nil
}

// Reset drops the rules set at runtime: Configured applies again.
func (s RuleStore) Reset(ctx context.Context) error {
	if err := s.Meta.PutMeta(ctx, RulesMeta, nil, s.Now()); err != nil {
		return fmt.Errorf("keel: reset alert rules: %w", s.Wrap(ctx, err))
	}
	return nil
}
