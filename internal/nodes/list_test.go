package nodes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/nodes"
)

var _ nodes.Lister = driver.Driver(nil)

type lister struct {
	rows []driver.NodeRow
	err  error
}

func (l lister) ListNodes(context.Context) ([]driver.NodeRow, error) { return l.rows, l.err }

// TestList: a node is lost once its last heartbeat is more than the live
// window old; every field of the row is kept.
func TestList(t *testing.T) {
	t.Parallel()
	live := 30 * time.Second
	rows := []driver.NodeRow{
		{Name: "a", Host: "h", PID: 7, Queues: []string{"q"}, StartedAt: t0.Add(-time.Hour), HeartbeatAt: t0.Add(-live),
			Workers: map[string]int{"q": 3}, Version: "v1", Running: 2},
		{Name: "b", HeartbeatAt: t0.Add(-live - time.Millisecond)},
	}
	got, err := nodes.List(context.Background(), lister{rows: rows}, t0, live)
	if err != nil || len(got) != 2 {
		t.Fatalf("%+v %v", got, err)
	}
	a := got[0]
	if a.Lost || a.Name != "a" || a.Host != "h" || a.PID != 7 || a.Queues[0] != "q" || !a.StartedAt.Equal(t0.Add(-time.Hour)) ||
		a.Workers["q"] != 3 || a.Version != "v1" || a.Running != 2 {
		t.Fatalf("a: %+v", a)
	}
	if !got[1].Lost {
		t.Fatalf("b: %+v, want lost", got[1])
	}
	down := errors.New("down")
	if _, err := nodes.List(context.Background(), lister{err: down}, t0, live); !errors.Is(err, down) {
		t.Fatalf("the driver fails: %v", err)
	}
}
