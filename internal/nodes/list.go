package nodes

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
)

// Info is one registered node as the API shows it: keel.NodeInfo, field
// for field (that type documents each), so that it converts.
type Info struct {
	Name        string
	Host        string
	PID         int
	Queues      []string
	StartedAt   time.Time
	HeartbeatAt time.Time
	Workers     map[string]int
	Version     string
	Running     int
	// Lost: its last heartbeat is older than the live window.
	Lost bool
}

// Lister is what List needs of a driver.
type Lister interface {
	ListNodes(ctx context.Context) ([]driver.NodeRow, error)
}

// List returns the registered nodes by name, each lost when its last
// heartbeat is more than live before now. The error is the driver's.
func List(ctx context.Context, drv Lister, now time.Time, live time.Duration) ([]Info, error) {
	rows, err := drv.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = Info{Name: r.Name, Host: r.Host, PID: r.PID, Queues: r.Queues, StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt,
			Workers: r.Workers, Version: r.Version, Running: r.Running, Lost: now.Sub(r.HeartbeatAt) > live}
	}
	return out, nil
}
