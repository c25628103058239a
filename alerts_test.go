package keel_test

import (
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/alerts"
)

func TestAlertRulesValidate(t *testing.T) {
	for name, r := range map[string]keel.AlertRules{
		"negative age":   {OldestReadyAge: -time.Second},
		"ratio 1":        {FailureRatio: 1, FailureMinAttempts: 1, FailureWindow: time.Minute},
		"no min":         {FailureRatio: 0.5, FailureWindow: time.Minute},
		"window too big": {FailureRatio: 0.5, FailureMinAttempts: 1, FailureWindow: 2 * time.Hour},
	} {
		if err := r.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := keel.DefaultAlertRules().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestAlertRuleNames: every rule constant is listed once, in keel's order.
func TestAlertRuleNames(t *testing.T) {
	want := []string{keel.RuleDeadPerHour, keel.RuleOldestReadyAge, keel.RuleFailureRatio, keel.RuleNoLiveWorker, keel.RuleNodeLost,
		keel.RuleBrakeOpen, keel.RuleSequenceBlocked, keel.RuleNotifierFailing}
	if got := keel.AlertRuleNames(); !slices.Equal(got, want) {
		t.Fatalf("AlertRuleNames() = %q, want %q", got, want)
	}
}

// TestAlertsUseReservedNames: the alert service's queue and types are the
// ones the root package reserves for keel.
func TestAlertsUseReservedNames(t *testing.T) {
	if alerts.Queue != keel.ReservedQueue {
		t.Fatalf("alerts.Queue %q, ReservedQueue %q", alerts.Queue, keel.ReservedQueue)
	}
	for _, typ := range []string{alerts.DrillType, alerts.NotifyType(alerts.LogNotifier)} {
		if !keel.IsKeelTask("default", typ) {
			t.Errorf("type %s is not keel's own", typ)
		}
	}
}
