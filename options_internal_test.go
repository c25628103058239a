package keel

import (
	"testing"

	"github.com/keelq/keel/internal/enqueue"
)

// TestEnqueueNamesAgree: internal/enqueue refuses and defaults to the
// queues and type prefix this package documents.
func TestEnqueueNamesAgree(t *testing.T) {
	if ReservedQueue != enqueue.KeelQueue || DefaultQueue != enqueue.DefaultQueue || reservedTypePrefix != "keel." {
		t.Fatalf("ReservedQueue %q, DefaultQueue %q, type prefix %q; internal/enqueue has %q, %q",
			ReservedQueue, DefaultQueue, reservedTypePrefix, enqueue.KeelQueue, enqueue.DefaultQueue)
	}
}
