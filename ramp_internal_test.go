package keel

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/keelq/keel/internal/ramp"
)

// TestRampDocumentFormat: the leader's judge (internal/ramp) reads and
// writes the stored ramp document the public RampState reads and writes,
// byte for byte, so a ramp started by one and judged by the other keeps
// every field.
func TestRampDocumentFormat(t *testing.T) {
	at := time.Date(2031, 3, 3, 12, 0, 30, 0, time.UTC)
	for _, st := range []RampState{
		{Type: "email", Ramp: Ramp{Steps: []int{1, 2, 5}, Every: time.Minute, MaxFailureRatio: 0.25, MinAttempts: 8},
			Step: 1, StepAt: at, NextAt: at.Add(time.Minute), Stopped: true, Reason: "why", Note: "waiting",
			StartedAt: at.Add(-time.Hour), UpdatedAt: at.Add(time.Second)},
		{Type: "sms", Ramp: Ramp{Steps: []int{3}, Every: time.Hour, MaxFailureRatio: 0.2, MinAttempts: 20}, Done: true,
			StepAt: at, NextAt: at, StartedAt: at, UpdatedAt: at},
	} {
		public, err := json.Marshal(&st)
		if err != nil {
			t.Fatal(err)
		}
		var judged ramp.State
		if err := ramp.Decode(public, &judged); err != nil {
			t.Fatal(err)
		}
		internal, err := json.Marshal(&judged)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(public, internal) {
			t.Fatalf("the documents differ:\npublic   %s\ninternal %s", public, internal)
		}
		var back RampState
		if err := ramp.Decode(internal, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(&back)
		if !bytes.Equal(again, public) {
			t.Fatalf("a round trip changed the document:\n%s\n%s", public, again)
		}
	}
}
