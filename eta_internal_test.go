package keel

import (
	"testing"

	"github.com/keelq/keel/internal/estimator"
)

// TestETAStatusesMatchTheModel: EstimateMany converts the model's statuses
// by value, so each ETAStatus must spell its model status.
func TestETAStatusesMatchTheModel(t *testing.T) {
	for status, model := range map[ETAStatus]estimator.Status{
		ETAEstimated: estimator.Estimated, ETAPaused: estimator.Paused, ETABraked: estimator.Braked,
		ETANoWorker: estimator.NoWorker, ETAUnknown: estimator.Unknown,
	} {
		if string(status) != string(model) {
			t.Errorf("ETAStatus %q, model status %q", status, model)
		}
	}
}
