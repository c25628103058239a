package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Operator queries: finished and ahead counts, bulk requeue and purge of
// dead letters, runtime settings. Their SQL is in queries.go.

// RetryMatching implements driver.Driver.
func (d *Driver) RetryMatching(ctx context.Context, p driver.Filter, now time.Time) (int64, error) {
	return sqlutil.Bulk("retry", p, 1, nil, func() (int64, error) {
		var n int64
		err := d.write(ctx, func(tx querier) error {
			n = 0
			var tally sqlutil.Tally
			query, args := sqlRetryMatching, append(matchArgs(p), micros(now))
			if len(p.IDs) > 0 {
				query, args = sqlRetryMatchingIDs, append(args, int64List(p.IDs))
			}
			err := sqlutil.Query(ctx, tx, query, args...)(func(scan sqlutil.Scan) error {
				o := sqlutil.RowState{State: p.State}
				if err := scan(&o.Queue, &o.Type, &o.Priority); err != nil {
					return err
				}
				n++
				r := o
				r.State, r.RunAt = driver.StatePending, now
				tally.Update(o, r, now, false)
				return nil
			})
			if err != nil {
				return err
			}
			return count(ctx, tx, &tally)
		})
		return n, err
	})
}

// PurgeMatching implements driver.Driver.
func (d *Driver) PurgeMatching(ctx context.Context, p driver.Filter) (int64, error) {
	return sqlutil.Bulk("purge", p, 1, nil, func() (int64, error) {
		var n int64
		err := d.write(ctx, func(tx querier) error {
			n = 0
			var tally sqlutil.Tally
			query, args := sqlPurgeMatching, matchArgs(p)
			if len(p.IDs) > 0 {
				query, args = sqlPurgeMatchingIDs, append(args, int64List(p.IDs))
			}
			err := sqlutil.Query(ctx, tx, query, args...)(func(scan sqlutil.Scan) error {
				o := sqlutil.RowState{State: p.State}
				if err := scan(&o.Queue, &o.Type); err != nil {
					return err
				}
				n++
				tally.Delete(o)
				return nil
			})
			if err != nil {
				return err
			}
			return count(ctx, tx, &tally)
		})
		return n, err
	})
}

// matchArgs are the arguments ?1 to ?5 of matchWhere and the limit ?6.
func matchArgs(p driver.Filter) []any { return sqlutil.MatchArgs(p, nullMicros, 1) }

// PatchSetting implements driver.Driver: one upsert in the single writer.
func (d *Driver) PatchSetting(ctx context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("patch setting: %w", err)
	}
	var s *driver.Setting
	err := d.write(ctx, func(tx querier) error {
		var err error
		s, err = scanSetting(tx.QueryRowContext(ctx, sqlPatchSetting, string(p.Kind), p.Name,
			p.Paused, p.Concurrency, driver.SettingMillis(p.Timeout), p.MaxAttempts,
			driver.SettingMillis(p.BackoffBase), driver.SettingMillis(p.BackoffMax), micros(p.Now),
			p.Rate, p.Burst).Scan)
		if err != nil {
			return fmt.Errorf("patch setting %s %s: %w", p.Kind, p.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// adminSQL are the settings, types and recent-task statements of
// sqlutil.Ops.
var adminSQL = sqlutil.AdminSQL{ListSettings: sqlListSettings, ListTypes: sqlListTypes, Recent: sqlRecentFinished,
	ScanSetting: scanSetting, ScanTypeDefaults: scanTypeDefaults, Ahead: sqlCountAhead,
	AheadArgs: func(p driver.AheadParams) []any {
		return []any{p.Queue, p.Priority, micros(p.RunAt), p.ID, micros(p.Now), micros(p.From), p.Limit}
	},
	DeclareArgs: func(t driver.TypeDefaults, now time.Time) (string, []any) {
		return sqlDeclareType, append(sqlutil.TypeArgs(t), micros(now))
	},
	TypesNamed: func(names []string) (string, []any) { return sqlListTypesNamed, []any{sqlutil.JSONStrings(names)} },
	RecentArgs: func(p driver.RecentParams) []any {
		var since int64
		if !p.Since.IsZero() {
			since = micros(p.Since)
		}
		return []any{since, p.Limit}
	},
	ScanFinished: func(scan sqlutil.Scan) (*driver.FinishedSample, error) {
		return sqlutil.ScanFinished(scan, fromMicros, optTime)
	},
}
