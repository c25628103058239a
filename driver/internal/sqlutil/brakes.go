package sqlutil

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// BrakeColumns are the columns of keel_brakes, as every driver selects
// them.
const BrakeColumns = `type, state, opened_at, open_until, probe_task_id, probe_owner, probe_at, probe_attempt,
	ratio, attempts, reason, closed_at, updated_at, cfg_window, cfg_threshold, cfg_cooldown_ms`

// ScanBrake reads one row selected with BrakeColumns; at turns the
// database's timestamp (T) into a UTC time.
func ScanBrake[T any](scan Scan, at func(T) time.Time) (*driver.BrakeRow, error) {
	var (
		r                               driver.BrakeRow
		state                           string
		opened, until, probeAt, closedA *T
		updated                         T
		probeID                         sql.NullInt64
		owner                           sql.NullString
		cooldown                        int64
	)
	if err := scan(&r.Type, &state, &opened, &until, &probeID, &owner, &probeAt, &r.ProbeAttempt,
		&r.Ratio, &r.Attempts, &r.Reason, &closedA, &updated, &r.Config.Window, &r.Config.Threshold, &cooldown); err != nil {
		return nil, err
	}
	r.Config.Cooldown = driver.SettingDuration(cooldown)
	opt := func(v *T) time.Time {
		if v == nil {
			return time.Time{}
		}
		return at(*v)
	}
	r.State, r.ProbeTaskID, r.ProbeOwner = driver.BrakeState(state), probeID.Int64, owner.String
	r.OpenedAt, r.Until, r.ProbeAt, r.ClosedAt, r.UpdatedAt = opt(opened), opt(until), opt(probeAt), opt(closedA), at(updated)
	return &r, nil
}

// BrakeArgs are the arguments of the drivers' brake update: the new
// row's state, opened_at, open_until, probe_task_id, probe_owner,
// probe_at, probe_attempt, ratio, attempts, reason, closed_at and
// updated_at; then the condition's type, three from states, "no owner
// check" and owner. tm turns a time into the database's argument, and a
// zero time into NULL.
func BrakeArgs(c driver.BrakeChange, tm func(time.Time) any) []any {
	t := c.To
	var probeID any
	if t.ProbeTaskID != 0 {
		probeID = t.ProbeTaskID
	}
	from := c.FromArgs()
	return []any{string(t.State), tm(t.OpenedAt), tm(t.Until), probeID, NullString(t.ProbeOwner), tm(t.ProbeAt),
		t.ProbeAttempt, t.Ratio, t.Attempts, t.Reason, tm(t.ClosedAt), tm(c.Now),
		t.Type, from[0], from[1], from[2], !c.OwnerCheck, c.Owner}
}

// BrakeConfigArgs are the arguments of the drivers' brake config update:
// cfg_window, cfg_threshold, cfg_cooldown_ms, updated_at (tm of Now), type.
func BrakeConfigArgs(p driver.BrakeConfigParams, tm func(time.Time) any) []any {
	return []any{p.Config.Window, p.Config.Threshold, *driver.SettingMillis(&p.Config.Cooldown), tm(p.Now), p.Type}
}

// BrakeSQL are a driver's keel_brakes statements: List selects
// BrakeColumns, read with Scan; Ensure (type, now) gives a type without a
// row a closed one, so that a change from closed has a row to update;
// Change takes BrakeArgs and SetConfig BrakeConfigArgs.
type BrakeSQL struct {
	List, Ensure, Change, SetConfig string
	Scan                            func(Scan) (*driver.BrakeRow, error)
}

// SetBrakeConfig implements driver.Braker.
func (o *Ops[Q]) SetBrakeConfig(ctx context.Context, p driver.BrakeConfigParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s, db := o.c.SQL.Brakes, o.c.DB
	err := db.Write(ctx, func(q Q) error {
		c := db.Conn(q)
		if _, err := c.Exec(ctx, s.Ensure, p.Type, db.Time(p.Now)); err != nil {
			return err
		}
		_, err := c.Exec(ctx, s.SetConfig, BrakeConfigArgs(p, db.Null)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("set brake config of %s: %w", p.Type, err)
	}
	return nil
}

// ListBrakes implements driver.Braker.
func (o *Ops[Q]) ListBrakes(ctx context.Context) ([]driver.BrakeRow, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Brakes.List), o.c.SQL.Brakes.Scan)
	if err != nil {
		return nil, fmt.Errorf("list brakes: %w", err)
	}
	return out, nil
}

// ChangeBrake implements driver.Braker.
func (o *Ops[Q]) ChangeBrake(ctx context.Context, ch driver.BrakeChange) (bool, error) {
	if err := ch.Validate(); err != nil {
		return false, err
	}
	s, db := o.c.SQL.Brakes, o.c.DB
	var applied bool
	err := db.Write(ctx, func(q Q) error {
		c := db.Conn(q)
		if ch.FromClosed() {
			if _, err := c.Exec(ctx, s.Ensure, ch.To.Type, db.Time(ch.Now)); err != nil {
				return err
			}
		}
		n, err := c.Exec(ctx, s.Change, BrakeArgs(ch, db.Null)...)
		applied = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("change brake of %s: %w", ch.To.Type, err)
	}
	return applied, nil
}
