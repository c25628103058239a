package keel

import (
	"testing"

	"github.com/keelq/keel/internal/enqueue"
)

// TestEnqueueNamesAgree: internal/enqueue refuses and defaults to the
// queues and type prefix this package documents.
func TestEnqueueNamesAgree(t *testing.T) {
	if ReservedQueue != enqueue.KeelQueue || DefaultQueue != enqueue.DefaultQueue || enqueue.KeelTypePrefix != "keel." {
		t.Fatalf("ReservedQueue %q, DefaultQueue %q; internal/enqueue has %q, %q and type prefix %q",
			ReservedQueue, DefaultQueue, enqueue.KeelQueue, enqueue.DefaultQueue, enqueue.KeelTypePrefix)
	}
}
