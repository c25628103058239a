package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Operator queries: finished and ahead counts, bulk requeue and purge of
// dead letters, runtime settings. Their SQL is in queries.go.

// RetryMatching implements driver.Driver: one statement, and one
// notification per queue that got ready tasks, in one transaction.
func (d *Driver) RetryMatching(ctx context.Context, p driver.Filter, now time.Time) (int64, error) {
	var queues []string
	n, err := sqlutil.Bulk("retry", p, sqlutil.RetryMatchingAttempts, isUniqueViolation, func() (int64, error) {
		args, query := append([]any{d.now(now)}, matchArgs(p)...), d.sql.retryMatching
		if len(p.IDs) > 0 {
			args, query = append(args, p.IDs), d.sql.retryMatchingIDs
		}
		var n int64
		err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			q := pgxQuerier{db: tx}
			n, queues = 0, nil
			err := q.query(ctx, query, args, func(scan func(...any) error) error {
				var queue string
				if err := scan(&queue); err != nil {
					return err
				}
				n++
				if !slices.Contains(queues, queue) {
					queues = append(queues, queue)
				}
				return nil
			})
			if err != nil {
				return err
			}
			return d.notifyQueues(ctx, q, queues, true)
		})
		return n, err
	})
	if err != nil {
		return 0, err
	}
	d.wakeLocal(queues)
	return n, nil
}

// PurgeMatching implements driver.Driver.
func (d *Driver) PurgeMatching(ctx context.Context, p driver.Filter) (int64, error) {
	return sqlutil.Bulk("purge", p, 1, nil, func() (int64, error) {
		args, query := append([]any{nil}, matchArgs(p)...), d.sql.purgeMatching
		if len(p.IDs) > 0 {
			args, query = append(args, p.IDs), d.sql.purgeMatchingIDs
		}
		return pgxQuerier{db: d.pool}.exec(ctx, query, args)
	})
}

// matchArgs are the arguments $2 to $6 of matchWhere and the limit $7.
func matchArgs(p driver.Filter) []any { return sqlutil.MatchArgs(p, sqlutil.NullTime, 1) }

// PatchSetting implements driver.Driver: one upsert. updated_at is the
// database clock unless Options.CallerClock is set.
func (d *Driver) PatchSetting(ctx context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("patch setting: %w", err)
	}
	var s *driver.Setting
	err := pgxQuerier{db: d.pool}.query(ctx, d.sql.patchSetting, []any{d.now(p.Now), string(p.Kind), p.Name,
		p.Paused, p.Concurrency, driver.SettingMillis(p.Timeout), p.MaxAttempts, driver.SettingMillis(p.BackoffBase), driver.SettingMillis(p.BackoffMax),
		p.Rate, p.Burst},
		func(scan func(...any) error) error {
			var err error
			s, err = sqlutil.ScanSettingUTC(scan)
			return err
		})
	if err == nil && s == nil {
		err = errors.New("no row returned")
	}
	if err != nil {
		return nil, fmt.Errorf("patch setting %s %s: %w", p.Kind, p.Name, err)
	}
	return s, nil
}

// adminSQL are the settings, types and recent-task statements of
// sqlutil.Ops. A type's updated_at is the database clock unless
// Options.CallerClock is set.
func (d *Driver) adminSQL() sqlutil.AdminSQL {
	return sqlutil.AdminSQL{ListSettings: d.sql.listSettings, ListTypes: d.sql.listTypes, Recent: d.sql.recentFinished,
		ScanSetting: sqlutil.ScanSettingUTC, ScanTypeDefaults: sqlutil.ScanTypeDefaultsUTC, Ahead: d.sql.countAhead,
		// Readiness is judged by the database clock unless
		// Options.CallerClock is set, like claims.
		AheadArgs: func(p driver.AheadParams) []any {
			return []any{d.now(p.Now), p.Queue, p.Priority, p.RunAt, p.ID, p.From, p.Limit}
		},
		DeclareArgs: func(t driver.TypeDefaults, now time.Time) (string, []any) {
			return d.sql.declareType, append([]any{d.now(now)}, sqlutil.TypeArgs(t)...)
		},
		TypesNamed: func(names []string) (string, []any) { return d.sql.listTypesNamed, []any{names} },
		RecentArgs: func(p driver.RecentParams) []any { return []any{p.Since, p.Limit} },
		ScanFinished: func(scan sqlutil.Scan) (*driver.FinishedSample, error) {
			return sqlutil.ScanFinished(scan, sqlutil.UTC, sqlutil.OptUTC)
		},
	}
}

// isUniqueViolation reports whether err is a unique violation (23505): a
// concurrent insert took an idempotency key.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
