package alerts

import (
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

// EncodeRules returns r as the RulesMeta document stores it.
func EncodeRules(r Rules) []byte {
	raw, _ := json.Marshal(storedRules{DeadPerHour: r.DeadPerHour, OldestReadyAge: r.OldestReadyAge.String(),
		FailureRatio: r.FailureRatio, FailureMinAttempts: r.FailureMinAttempts, FailureWindow: r.FailureWindow.String(),
		NoLiveWorker: r.NoLiveWorker, NodeLost: r.NodeLost})
	return raw
}

// DecodeRules reads a RulesMeta document.
func DecodeRules(raw []byte) (Rules, error) {
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
