package alerts

import (
	"strings"
	"testing"
	"time"
)

// TestRulesDocument: the rules set at runtime are stored with durations
// as strings and read back the same; a document that is not valid says
// so.
func TestRulesDocument(t *testing.T) {
	r := Rules{DeadPerHour: 7, OldestReadyAge: 90 * time.Second, FailureRatio: 0.25, FailureMinAttempts: 3,
		FailureWindow: 2 * time.Minute, NodeLost: true}
	raw := EncodeRules(r)
	const want = `{"dead_per_hour":7,"oldest_ready_age":"1m30s","failure_ratio":0.25,"failure_min_attempts":3,` +
		`"failure_window":"2m0s","no_live_worker":false,"node_lost":true}`
	if string(raw) != want {
		t.Fatalf("stored %s\nwant %s", raw, want)
	}
	got, err := DecodeRules(raw)
	if err != nil || got != r {
		t.Fatalf("read back %+v, %v; want %+v", got, err, r)
	}
	for doc, why := range map[string]string{
		`[1]`:                       "cannot unmarshal array",
		`{"oldest_ready_age":"zz"}`: `invalid duration "zz"`,
		`{"oldest_ready_age":"1m"}`: `invalid duration ""`,
		`{"oldest_ready_age":"1m","failure_window":"zz"}`: `invalid duration "zz"`,
	} {
		_, err := DecodeRules([]byte(doc))
		if err == nil || !strings.HasPrefix(err.Error(), "keel: stored alert rules are not valid: ") || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want not valid: …%s", doc, err, why)
		}
	}
}
