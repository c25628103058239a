package keel_test

import (
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel"
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
		keel.RuleBrakeOpen, keel.RuleNotifierFailing}
	if got := keel.AlertRuleNames(); !slices.Equal(got, want) {
		t.Fatalf("AlertRuleNames() = %q, want %q", got, want)
	}
}
