package sqlutil

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/migrate"
)

// Applier is a driver's part of applying migrations, in its dialect and
// under its lock.
type Applier interface {
	// AppliedAt reports when version was applied, or ok false if it was not.
	AppliedAt(ctx context.Context, version int) (at time.Time, ok bool, err error)
	// Apply runs m and records it. applied is false when another migrator
	// applied m first; at is when m was applied.
	Apply(ctx context.Context, m migrate.Migration) (applied bool, at time.Time, err error)
}

// Migrate loads the migrations in dir of fsys, applies with m every one not
// yet applied, in version order, and reports every known version.
func Migrate(ctx context.Context, fsys fs.FS, dir string, m Applier) ([]driver.Migration, error) {
	ms, err := migrate.Load(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := make([]driver.Migration, 0, len(ms))
	for _, mig := range ms {
		at, ok, err := m.AppliedAt(ctx, mig.Version)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mig.Name, err)
		}
		applied := false
		if !ok {
			if applied, at, err = m.Apply(ctx, mig); err != nil {
				return nil, fmt.Errorf("%s: %w", mig.Name, err)
			}
		}
		out = append(out, driver.Migration{Version: mig.Version, Name: mig.Name, Applied: applied, AppliedAt: at})
	}
	return out, nil
}

// Migrate implements driver.Driver: it applies every embedded migration
// not yet applied, as the driver's Migrations does.
func (o *Ops[Q]) Migrate(ctx context.Context) error {
	_, err := o.c.ApplyMigrations(ctx)
	return err
}

// MigratedAt reads when a migration was applied from rows (one time, none
// when it was not): the AppliedAt of an Applier. T is how the database
// hands over a timestamp and at turns it into a UTC time.
func MigratedAt[T any](rows Rows, at func(T) time.Time) (time.Time, bool, error) {
	t, err := One(rows, func(scan Scan) (*T, error) {
		var t T
		return &t, scan(&t)
	})
	if err != nil || t == nil {
		return time.Time{}, false, err
	}
	return at(*t), true, nil
}
