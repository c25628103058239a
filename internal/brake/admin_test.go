package brake

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

var adminNow = time.Date(2031, 3, 3, 12, 0, 0, 0, time.UTC)

// brakes is a fake driver.Braker holding rows by type; err fails every
// call.
type brakes struct {
	rows    []driver.BrakeRow
	err     error
	changes []driver.BrakeChange
}

func (b *brakes) ListBrakes(context.Context) ([]driver.BrakeRow, error) {
	return slices.Clone(b.rows), b.err
}

func (b *brakes) ChangeBrake(_ context.Context, c driver.BrakeChange) (bool, error) {
	if b.err != nil {
		return false, b.err
	}
	b.changes = append(b.changes, c)
	for i := range b.rows {
		if b.rows[i].Type == c.To.Type && slices.Contains(c.From, b.rows[i].State) {
			b.rows[i] = c.To
			return true, nil
		}
	}
	return false, nil
}

func (b *brakes) SetBrakeConfig(_ context.Context, p driver.BrakeConfigParams) error {
	if b.err != nil {
		return b.err
	}
	for i := range b.rows {
		if b.rows[i].Type == p.Type {
			b.rows[i].Config = p.Config
			return nil
		}
	}
	b.rows = append(b.rows, driver.BrakeRow{Type: p.Type, State: driver.BrakeClosed, Config: p.Config, UpdatedAt: p.Now})
	return nil
}

func admin(b *brakes, closed *int) *Admin {
	a := &Admin{Now: func() time.Time { return adminNow }, Reserved: func(t string) bool { return strings.HasPrefix(t, "keel.") },
		Closed: func(context.Context) { *closed++ }}
	if b != nil {
		a.Driver = b
	}
	return a
}

// TestAdminRefuses: bad input is ErrInvalid, a brake not open or no
// brakes at all ErrWrongState; nothing is written.
func TestAdminRefuses(t *testing.T) {
	ctx := context.Background()
	b := &brakes{rows: []driver.BrakeRow{{Type: "shut", State: driver.BrakeClosed}}}
	var closed int
	a := admin(b, &closed)
	for _, tc := range []struct {
		err      error
		sentinel error
		want     string
	}{
		{second(a.Set(ctx, "a b", driver.BrakeConfig{})), kerr.ErrInvalid, `invalid task type "a b"`},
		{second(a.Set(ctx, "keel.drill", driver.BrakeConfig{})), kerr.ErrInvalid, `task type "keel.drill": keel's own types never brake`},
		{second(a.Set(ctx, "t", driver.BrakeConfig{Window: 20000})), kerr.ErrInvalid, "brake window must be in 1..10000"},
		{second(a.Set(ctx, "t", driver.BrakeConfig{Cooldown: time.Nanosecond})), kerr.ErrInvalid, "whole number of milliseconds"},
		{second(a.Close(ctx, "a b")), kerr.ErrInvalid, `invalid task type "a b"`},
		{second(a.Close(ctx, "shut")), driver.ErrWrongState, `the brake of type "shut" is not open`},
		{second(a.Close(ctx, "none")), driver.ErrWrongState, `the brake of type "none" is not open`},
		{second(admin(nil, &closed).Set(ctx, "t", driver.BrakeConfig{})), driver.ErrWrongState, "the driver stores no brakes"},
		{second(admin(nil, &closed).Close(ctx, "t")), driver.ErrWrongState, "the driver stores no brakes"},
	} {
		if !errors.Is(tc.err, tc.sentinel) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%v, want %v with %q", tc.err, tc.sentinel, tc.want)
		}
	}
	if len(b.rows) != 1 || len(b.changes) != 0 || closed != 0 {
		t.Fatalf("refused calls wrote %+v %+v (closed %d)", b.rows, b.changes, closed)
	}
}

func second[T any](_ T, err error) error { return err }

// TestAdminSetAndClose: Set stores the thresholds and returns the brake;
// Close closes an open brake by hand, keeping its evidence, and tells
// Closed.
func TestAdminSetAndClose(t *testing.T) {
	ctx := context.Background()
	opened := adminNow.Add(-time.Minute)
	b := &brakes{rows: []driver.BrakeRow{{Type: "open", State: driver.BrakeOpen, OpenedAt: opened, Ratio: 0.9, Attempts: 20}}}
	var closed int
	a := admin(b, &closed)
	row, err := a.Set(ctx, "new", driver.BrakeConfig{Window: 50, Threshold: 0.5, Cooldown: time.Second})
	if err != nil || row.Type != "new" || row.Config.Window != 50 || row.State != driver.BrakeClosed {
		t.Fatalf("set %+v %v", row, err)
	}
	row, err = a.Close(ctx, "open")
	if err != nil || row.State != driver.BrakeClosed || !row.OpenedAt.Equal(opened) || row.Ratio != 0.9 || row.Attempts != 20 ||
		row.Reason != "closed by hand" || !row.ClosedAt.Equal(adminNow) || !row.UpdatedAt.Equal(adminNow) || closed != 1 {
		t.Fatalf("close %+v %v (closed %d)", row, err, closed)
	}
	if c := b.changes[0]; !slices.Equal(c.From, []driver.BrakeState{driver.BrakeOpen, driver.BrakeHalfOpen}) || !c.Now.Equal(adminNow) {
		t.Fatalf("change %+v", c)
	}
}

// TestAdminList: nil without brakes, an empty slice when none is stored,
// and a driver's error wrapped through Wrap.
func TestAdminList(t *testing.T) {
	ctx := context.Background()
	var closed int
	if rows, err := admin(nil, &closed).List(ctx); rows != nil || err != nil {
		t.Fatalf("no brakes: %v %v", rows, err)
	}
	b := &brakes{}
	if rows, err := admin(b, &closed).List(ctx); rows == nil || len(rows) != 0 || err != nil {
		t.Fatalf("none stored: %#v %v", rows, err)
	}
	b.err = errors.New("down")
	a := admin(b, &closed)
	a.Wrap = func(_ context.Context, err error) error { return errors.Join(errors.New("wrapped"), err) }
	for want, err := range map[string]error{
		"keel: list brakes: wrapped": second(a.List(ctx)),
		"keel: set brake: wrapped":   second(a.Set(ctx, "t", driver.BrakeConfig{})),
		"keel: close brake: wrapped": second(a.Close(ctx, "t")),
	} {
		if !errors.Is(err, b.err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v", want, err)
		}
	}
}
