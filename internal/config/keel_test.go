package config_test

import (
	"testing"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/config"
)

// TestLeastRetentionMatchesKeel: Check refuses exactly below the least
// retention package keel documents.
func TestLeastRetentionMatchesKeel(t *testing.T) {
	if config.MinRetainSucceeded != keel.MinRetainSucceeded || config.MinRetainDead != keel.MinRetainDead {
		t.Fatalf("config has %v and %v, keel %v and %v", config.MinRetainSucceeded, config.MinRetainDead,
			keel.MinRetainSucceeded, keel.MinRetainDead)
	}
}

// TestNoPrefetchMatchesKeel: Check accepts keel.NoPrefetch as "off".
func TestNoPrefetchMatchesKeel(t *testing.T) {
	if config.NoPrefetch != keel.NoPrefetch {
		t.Fatalf("config has %d, keel %d", config.NoPrefetch, keel.NoPrefetch)
	}
}
