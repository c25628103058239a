package enqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/tracing"
)

// Declarer is what an Inserter needs of the type declarations (package
// declare): this client's written, others' read.
type Declarer interface {
	Declare(ctx context.Context) error
	DeclareLater(ctx context.Context)
	Stored(ctx context.Context, types []string) (map[string]*driver.TypeDefaults, error)
}

// InsertFunc inserts prepared tasks in one transaction: a driver's
// Insert, or its InsertTx in a caller's transaction.
type InsertFunc = func(params []driver.InsertParams) ([]driver.InsertResult, error)

// Insert is the InsertFunc of an enqueue with drv, in the caller's
// transaction tx (nil: a transaction of its own). Tasks that depend on
// others go, with the rest of the enqueue, to drv's Workflows.InsertHeld.
func Insert(ctx context.Context, drv driver.Driver, tx driver.Tx) InsertFunc {
	return func(params []driver.InsertParams) ([]driver.InsertResult, error) {
		if slices.ContainsFunc(params, func(p driver.InsertParams) bool { return len(p.DependsOn) > 0 }) {
			w, ok := drv.(driver.Workflows)
			if !ok {
				return nil, kerr.Invalid("DependsOn: this driver keeps no task dependencies")
			}
			return w.InsertHeld(ctx, tx, params)
		}
		if tx != nil {
			return drv.InsertTx(ctx, tx, params)
		}
		return drv.Insert(ctx, params)
	}
}

// Dependency reports driver.ErrDependency as ErrInvalid (bad input:
// nothing was written); other errors are returned as they are.
func Dependency(err error) error {
	if errors.Is(err, driver.ErrDependency) {
		return fmt.Errorf("%w: %w", kerr.ErrInvalid, err)
	}
	return err
}

// Inserter runs a caller's enqueue (keel.Client.EnqueueMany and its
// transactional twin): it declares this client's types, prepares each
// task, starts its span and inserts them all.
type Inserter struct {
	Prep   *Preparer
	Decl   Declarer
	Tracer trace.Tracer
	// Gate, when set, inserts a single task with an idempotency key
	// outside a caller's transaction (the Redis gate, which calls insert
	// when the database must decide).
	Gate func(ctx context.Context, p driver.InsertParams, insert InsertFunc) ([]driver.InsertResult, error)
	Now  func() time.Time
	// Wrap classifies an insert's error (ErrUnavailable when the database
	// could not be reached).
	Wrap func(ctx context.Context, err error) error
	// Wrote is told about every task inserted (not a duplicate), to wake
	// this process's workers.
	Wrote func(row *driver.TaskRow)
}

// Funcs returns opts as the functions a Spec holds.
func Funcs[F ~func(*Options)](opts []F) []func(*Options) {
	out := make([]func(*Options), len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// Enqueue validates specs and inserts them with insert, all or none.
// inTx says insert runs in the caller's transaction: this client's type
// declarations are then stored in the background rather than before the
// insert, and the gate is not used.
func (in *Inserter) Enqueue(ctx context.Context, specs []Spec, inTx bool, insert InsertFunc) ([]driver.InsertResult, error) {
	if len(specs) == 0 {
		return nil, kerr.Invalid("no tasks to enqueue")
	}
	params, err := in.Prepare(ctx, specs, inTx)
	if err != nil {
		return nil, err
	}
	spans, err := tracing.StartEnqueue(ctx, in.Tracer, params)
	if err != nil {
		return nil, err
	}
	var results []driver.InsertResult
	if in.Gate != nil && !inTx && len(params) == 1 && params[0].IdemKey != "" {
		results, err = in.Gate(ctx, params[0], insert)
	} else {
		results, err = insert(params)
	}
	if err != nil {
		err = fmt.Errorf("enqueue: %w", in.Wrap(ctx, Dependency(err)))
		for _, s := range spans {
			s.RecordError(err)
			s.SetStatus(codes.Error, err.Error())
			s.End()
		}
		return nil, err
	}
	for i, r := range results {
		if !r.Duplicate {
			in.Wrote(r.Task)
		}
		if spans[i].IsRecording() {
			spans[i].SetAttributes(tracing.AttrTaskID.Int64(r.Task.ID), tracing.AttrDuplicate.Bool(r.Duplicate))
		}
		spans[i].End()
	}
	return results, nil
}

// Prepare declares this client's types (later, when inTx: the caller's
// transaction must not wait on another), reads the stored declarations
// the specs need, and checks and turns every spec into insert parameters.
// Bad input is an error naming the spec (when there are several) and
// writes nothing.
func (in *Inserter) Prepare(ctx context.Context, specs []Spec, inTx bool) ([]driver.InsertParams, error) {
	if inTx {
		in.Decl.DeclareLater(ctx)
	} else if err := in.Decl.Declare(ctx); err != nil {
		return nil, err
	}
	stored, err := in.Decl.Stored(ctx, in.Prep.Undeclared(specs))
	if err != nil {
		return nil, err
	}
	now := in.Now()
	params := make([]driver.InsertParams, len(specs))
	for i, j := range specs {
		p, err := in.Prep.PrepareEnqueue(j, now, stored)
		if err != nil {
			if len(specs) > 1 {
				return nil, fmt.Errorf("task %d: %w", i, err)
			}
			return nil, err
		}
		params[i] = p
	}
	return params, nil
}
