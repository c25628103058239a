package sqlutil

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// AdminSQL are a driver's statements of runtime settings, type defaults
// and recent finished tasks: ListSettings selects the drivers'
// settingColumns for ScanSetting; Declare stores a type with DeclareArgs;
// ListTypes selects every type's typeColumns, and TypesNamed is the query
// and arguments of the types named; Recent selects the FinishedSample
// columns of the tasks RecentArgs asks for, read with ScanFinished.
type AdminSQL struct {
	ListSettings, ListTypes, Recent string
	ScanSetting                     func(Scan) (*driver.Setting, error)
	DeclareArgs                     func(t driver.TypeDefaults, now time.Time) (query string, args []any)
	TypesNamed                      func(names []string) (query string, args []any)
	ScanTypeDefaults                func(Scan) (*driver.TypeDefaults, error)
	RecentArgs                      func(p driver.RecentParams) []any
	ScanFinished                    func(Scan) (*driver.FinishedSample, error)
	// Ahead counts the tasks ahead of one, with AheadArgs.
	Ahead     string
	AheadArgs func(p driver.AheadParams) []any
}

// CountAhead implements driver.Driver.
func (o *Ops[Q]) CountAhead(ctx context.Context, p driver.AheadParams) (int64, error) {
	n, err := scanOne[int64](o.c.DB.pool().Rows(ctx, o.c.SQL.Admin.Ahead, o.c.SQL.Admin.AheadArgs(p)...))
	if err != nil {
		return 0, fmt.Errorf("count tasks ahead of task %d: %w", p.ID, err)
	}
	return n, nil
}

// ListSettings implements driver.Driver.
func (o *Ops[Q]) ListSettings(ctx context.Context) ([]driver.Setting, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Admin.ListSettings), o.c.SQL.Admin.ScanSetting)
	if err != nil {
		return nil, fmt.Errorf("list settings: %w", err)
	}
	return out, nil
}

// DeclareTypes implements driver.Driver: one upsert per type, in name
// order, in one transaction.
func (o *Ops[Q]) DeclareTypes(ctx context.Context, p driver.DeclareTypesParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	types := SortedTypes(p)
	err := o.c.DB.Write(ctx, func(q Q) error {
		for _, t := range types {
			query, args := o.c.SQL.Admin.DeclareArgs(t, p.Now)
			if _, err := o.c.DB.Conn(q).Exec(ctx, query, args...); err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("declare types: %w", err)
	}
	return nil
}

// ListTypes implements driver.Driver.
func (o *Ops[Q]) ListTypes(ctx context.Context, names []string) ([]driver.TypeDefaults, error) {
	s := o.c.SQL.Admin
	rows := o.c.DB.pool().Rows(ctx, s.ListTypes)
	if names != nil {
		if len(names) == 0 {
			return nil, nil
		}
		query, args := s.TypesNamed(names)
		rows = o.c.DB.pool().Rows(ctx, query, args...)
	}
	out, err := Collect(rows, s.ScanTypeDefaults)
	if err != nil {
		return nil, fmt.Errorf("list types: %w", err)
	}
	return out, nil
}

// RecentFinished implements driver.Driver.
func (o *Ops[Q]) RecentFinished(ctx context.Context, p driver.RecentParams) ([]driver.FinishedSample, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("read recent finished tasks: %w", err)
	}
	out := make([]driver.FinishedSample, 0, min(p.Limit, 1000))
	err := o.c.DB.pool().Rows(ctx, o.c.SQL.Admin.Recent, o.c.SQL.Admin.RecentArgs(p)...)(func(scan Scan) error {
		s, err := o.c.SQL.Admin.ScanFinished(scan)
		if err != nil {
			return err
		}
		out = append(out, *s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read recent finished tasks: %w", err)
	}
	return out, nil
}

// ScanFinished reads one row of id, queue, type, state, attempt,
// created_at, run_at, attempted_at, finished_at. T is how the database
// hands over a timestamp and N one that may be NULL; at and opt turn them
// into UTC times (opt gives the zero time for NULL).
func ScanFinished[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time) (*driver.FinishedSample, error) {
	var (
		s                       driver.FinishedSample
		state                   string
		created, runAt, finishd T
		attempted               N
	)
	if err := scan(&s.ID, &s.Queue, &s.Type, &state, &s.Attempt, &created, &runAt, &attempted, &finishd); err != nil {
		return nil, err
	}
	s.State, s.AttemptedAt = driver.State(state), opt(attempted)
	s.CreatedAt, s.RunAt, s.FinishedAt = at(created), at(runAt), at(finishd)
	return &s, nil
}
