package engine

import (
	"context"
	"testing"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/archiver"
)

// TestNilEngineDoesNothing: a client not started holds a nil *Engine, and
// the calls it makes on it between writes do nothing instead of panicking.
func TestNilEngineDoesNothing(t *testing.T) {
	var e *Engine
	e.ApplySetting(driver.Setting{Kind: driver.SettingQueue, Name: "q"})
	e.BrakesChanged(context.Background())
	e.Wrote(&driver.TaskRow{Queue: "q", State: driver.StatePending})
	e.WroteQueue("q")
	e.Cancel(1)
	if e.Leading() || e.Runaway() != 0 || e.Archived() != (archiver.Totals{}) {
		t.Fatal("a nil Engine leads, or counts runaways or archived tasks")
	}
}
