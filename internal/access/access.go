// Package access lets keel's public feature packages (batch, workflow)
// reach the parts of a *keel.Client they build on, without methods on
// Client for each feature. Package keel sets Of when it is initialised.
package access

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/enqueue"
)

// Parts are what a feature package uses of a client.
type Parts struct {
	Driver driver.Driver
	Enq    *enqueue.Inserter
	Now    func() time.Time
	// Wrap turns a driver's error into the error a call returns (it marks
	// an unreachable database).
	Wrap func(ctx context.Context, err error) error
	// Info converts a row to a *keel.TaskInfo (returned as any: this
	// package cannot name keel's types).
	Info func(r *driver.TaskRow) any
	// Enqueued converts an enqueue's results to []*keel.TaskInfo and tells
	// the client's observers, as Client.EnqueueMany does.
	Enqueued func(results []driver.InsertResult) any
	// Finish estimates when task id finishes (zero: no estimate).
	Finish func(ctx context.Context, id int64) time.Time
}

// Of returns client's parts; client must be a *keel.Client. Set by
// package keel.
var Of func(client any) *Parts
