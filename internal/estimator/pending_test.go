package estimator_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// TestEstimatePending: nil tasks get nil estimates in their places, and
// a call with no task reads nothing.
func TestEstimatePending(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	clk := &clock{now: t0}
	st := &store{
		settings: []driver.Setting{{Kind: driver.SettingType, Name: "paused", Paused: true}},
		nodes:    []driver.NodeRow{node(t0, 1)},
	}
	e := newEstimator(st, clk)
	if es, err := e.EstimatePending(context.Background(), []*estimator.Task{nil, nil}); err != nil || len(es) != 2 ||
		es[0] != nil || es[1] != nil || st.countReads != 0 {
		t.Fatalf("no task: %v, %v, %d reads", es, err, st.countReads)
	}
	paused, later := pending(1, "paused", 0, t0), pending(2, "t", 0, t0.Add(time.Hour))
	es, err := e.EstimatePending(context.Background(), []*estimator.Task{nil, &paused, nil, &later})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 4 || es[0] != nil || es[2] != nil || es[1] == nil || es[1].Status != estimator.Paused ||
		es[3] == nil || es[3].Status != estimator.Estimated || !es[3].Start.Equal(t0.Add(time.Hour)) {
		t.Fatalf("estimates %v", es)
	}
}
