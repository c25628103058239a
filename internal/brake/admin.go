package brake

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// Admin is the API's calls on the stored brakes: list them, set a type's
// thresholds at runtime, close one by hand. Unlike the judgement above,
// it reads and writes the driver.
type Admin struct {
	// Driver stores the brakes; nil when the driver keeps none.
	Driver driver.Braker
	Now    func() time.Time
	// Wrap turns a driver's error into the error returned (the client
	// marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
	// Reserved reports whether a type is keel's own: those never brake.
	Reserved func(taskType string) bool
	// Closed, when set, is told after Close closed a brake (the client's
	// engine claims the type's tasks again at once).
	Closed func(ctx context.Context)
}

// List returns every stored brake, ordered by type: nil when the driver
// keeps no brakes, else a slice, empty when none is stored.
func (a *Admin) List(ctx context.Context) ([]driver.BrakeRow, error) {
	if a.Driver == nil {
		return nil, nil
	}
	rows, err := a.Driver.ListBrakes(ctx)
	if err != nil {
		return nil, fmt.Errorf("keel: list brakes: %w", a.wrap(ctx, err))
	}
	if rows == nil {
		rows = []driver.BrakeRow{}
	}
	return rows, nil
}

// Set replaces taskType's runtime thresholds (zero fields: not set) and
// returns its brake as stored. Bad values are kerr.ErrInvalid and write
// nothing.
func (a *Admin) Set(ctx context.Context, taskType string, cfg driver.BrakeConfig) (*driver.BrakeRow, error) {
	if err := checkType(taskType); err != nil {
		return nil, err
	}
	if a.Reserved != nil && a.Reserved(taskType) {
		return nil, kerr.Invalid("task type %q: keel's own types never brake", taskType)
	}
	if a.Driver == nil {
		return nil, fmt.Errorf("%w: the driver stores no brakes", driver.ErrWrongState)
	}
	p := driver.BrakeConfigParams{Type: taskType, Config: cfg, Now: a.Now()}
	if err := p.Validate(); err != nil {
		return nil, kerr.Invalid("%v", err)
	}
	if err := a.Driver.SetBrakeConfig(ctx, p); err != nil {
		return nil, fmt.Errorf("keel: set brake: %w", a.wrap(ctx, err))
	}
	rows, err := a.List(ctx)
	if err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(rows, func(r driver.BrakeRow) bool { return r.Type == taskType }); i >= 0 {
		return &rows[i], nil
	}
	return nil, fmt.Errorf("keel: set brake: the brake of %q was not stored", taskType)
}

// Close closes taskType's open or half-open brake by hand and returns it
// as written; a brake that is not open is driver.ErrWrongState.
func (a *Admin) Close(ctx context.Context, taskType string) (*driver.BrakeRow, error) {
	if err := checkType(taskType); err != nil {
		return nil, err
	}
	if a.Driver == nil {
		return nil, fmt.Errorf("%w: the driver stores no brakes", driver.ErrWrongState)
	}
	rows, err := a.Driver.ListBrakes(ctx)
	if err != nil {
		return nil, fmt.Errorf("keel: close brake: %w", a.wrap(ctx, err))
	}
	i := slices.IndexFunc(rows, func(r driver.BrakeRow) bool { return r.Type == taskType })
	if i < 0 || rows[i].State == driver.BrakeClosed {
		return nil, fmt.Errorf("%w: the brake of type %q is not open", driver.ErrWrongState, taskType)
	}
	now := a.Now()
	to := driver.BrakeRow{Type: taskType, State: driver.BrakeClosed, OpenedAt: rows[i].OpenedAt, Ratio: rows[i].Ratio,
		Attempts: rows[i].Attempts, ClosedAt: now, Reason: "closed by hand", Config: rows[i].Config}
	applied, err := a.Driver.ChangeBrake(ctx, driver.BrakeChange{To: to, From: []driver.BrakeState{driver.BrakeOpen, driver.BrakeHalfOpen}, Now: now})
	if err != nil {
		return nil, fmt.Errorf("keel: close brake: %w", a.wrap(ctx, err))
	}
	if !applied {
		return nil, fmt.Errorf("%w: the brake of type %q is not open", driver.ErrWrongState, taskType)
	}
	if a.Closed != nil {
		a.Closed(ctx)
	}
	to.UpdatedAt = now
	return &to, nil
}

// checkType refuses an invalid task type name.
func checkType(taskType string) error {
	if !driver.ValidName(taskType) {
		return kerr.Invalid("invalid task type %q", taskType)
	}
	return nil
}

func (a *Admin) wrap(ctx context.Context, err error) error {
	if a.Wrap == nil {
		return err
	}
	return a.Wrap(ctx, err)
}
