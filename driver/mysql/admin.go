package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Operator queries: ahead counts, bulk requeue and purge of
// dead letters, runtime settings. Their SQL is in queries.go.

// RetryMatching implements driver.Driver: in one transaction, lock the
// first matching tasks whose idempotency key no other task holds, keep the
// first of those sharing a key, and requeue them like Retry.
func (d *Driver) RetryMatching(ctx context.Context, p driver.Filter, now time.Time) (int64, error) {
	return sqlutil.Bulk("retry", p, sqlutil.RetryMatchingAttempts, isDuplicate, func() (int64, error) {
		var n int64
		err := d.inTx(ctx, func(tx *sql.Tx) error {
			n = 0
			pick := sqlRetryMatchingPick
			args := matchArgs(p)
			if len(p.IDs) > 0 {
				pick = sqlRetryMatchingPickIDs.with("{ids}", "?", len(p.IDs), 1)
				args = append(idArgs(p.IDs), args...)
			}
			rows, err := tx.QueryContext(ctx, pick.text, pick.args(d.now(now), args...)...)
			if err != nil {
				return err
			}
			var ids []int64
			var olds []sqlutil.RowState
			var at time.Time
			keys := map[string]bool{}
			for rows.Next() {
				var id int64
				var key sql.NullString
				o := sqlutil.RowState{State: p.State}
				if err := rows.Scan(&id, &key, &o.Queue, &o.Type, &o.Priority, &at); err != nil {
					rows.Close()
					return err
				}
				if key.Valid {
					if keys[key.String] {
						continue // a lower id with the same key goes first
					}
					keys[key.String] = true
				}
				ids, olds = append(ids, id), append(olds, o)
			}
			rows.Close()
			if err := rows.Err(); err != nil || len(ids) == 0 {
				return err
			}
			mark := sqlRetryMatchingMark.with("{ids}", "?", len(ids), 1)
			// The rows are locked: every one is requeued, at the pick's now.
			at = at.UTC()
			if _, err := tx.ExecContext(ctx, mark.text, mark.args(at, idArgs(ids)...)...); err != nil {
				return err
			}
			n = int64(len(ids))
			var tally sqlutil.Tally
			for _, o := range olds {
				r := o
				r.State, r.RunAt = driver.StatePending, at
				tally.Update(o, r, at, false)
			}
			return count(ctx, tx, &tally)
		})
		return n, err
	})
}

// PurgeMatching implements driver.Driver: lock the first matching tasks,
// then delete them, in one transaction.
func (d *Driver) PurgeMatching(ctx context.Context, p driver.Filter) (int64, error) {
	return sqlutil.Bulk("purge", p, 1, nil, func() (int64, error) {
		var n int64
		err := d.inTx(ctx, func(tx *sql.Tx) error {
			n = 0
			var ids []int64
			var tally sqlutil.Tally
			pick, args := sqlPurgeMatchingPick, matchArgs(p)
			if len(p.IDs) > 0 {
				pick = sqlPurgeMatchingPickIDs.with("{ids}", "?", len(p.IDs), 1)
				args = append(idArgs(p.IDs), args...)
			}
			err := sqlutil.Query(ctx, tx, pick.text, pick.args(nil, args...)...)(func(scan sqlutil.Scan) error {
				var id int64
				o := sqlutil.RowState{State: p.State}
				if err := scan(&id, &o.Queue, &o.Type); err != nil {
					return err
				}
				ids = append(ids, id)
				tally.Delete(o)
				return nil
			})
			if err != nil || len(ids) == 0 {
				return err
			}
			// The rows are locked: every one is deleted.
			del := sqlPurgeMatchingDelete.with("{ids}", "?", len(ids), 1)
			if _, err := tx.ExecContext(ctx, del.text, del.args(nil, idArgs(ids)...)...); err != nil {
				return err
			}
			n = int64(len(ids))
			return count(ctx, tx, &tally)
		})
		return n, err
	})
}

// matchArgs are the arguments of matchWhere, in order (each optional
// filter twice), and the limit.
func matchArgs(p driver.Filter) []any { return sqlutil.MatchArgs(p, sqlutil.NullTime, 2) }

// PatchSetting implements driver.Driver: one upsert, which locks the row,
// and the read back, in one transaction. updated_at is the database clock
// unless Options.CallerClock is set.
func (d *Driver) PatchSetting(ctx context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("patch setting: %w", err)
	}
	paused, conc, maxAttempts := p.Paused, p.Concurrency, p.MaxAttempts
	timeout, base, maxMS := driver.SettingMillis(p.Timeout), driver.SettingMillis(p.BackoffBase), driver.SettingMillis(p.BackoffMax)
	var s *driver.Setting
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, sqlPatchSetting.text, sqlPatchSetting.args(d.now(p.Now), string(p.Kind), p.Name,
			paused, conc, timeout, maxAttempts, base, maxMS, p.Rate, p.Burst,
			paused, conc, timeout, maxAttempts, base, maxMS, p.Rate, p.Burst, p.Rate, p.Burst)...); err != nil {
			return err
		}
		var err error
		s, err = sqlutil.ScanSettingUTC(tx.QueryRowContext(ctx, sqlGetSetting, string(p.Kind), p.Name).Scan)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("patch setting %s %s: %w", p.Kind, p.Name, err)
	}
	return s, nil
}

// adminSQL are the settings, types and recent-task statements of
// sqlutil.Ops. A type's updated_at is the database clock unless
// Options.CallerClock is set.
func (d *Driver) adminSQL() sqlutil.AdminSQL {
	return sqlutil.AdminSQL{ListSettings: sqlListSettings, ListTypes: sqlListTypes.text, Recent: sqlRecentFinished,
		ScanSetting: sqlutil.ScanSettingUTC, ScanTypeDefaults: sqlutil.ScanTypeDefaultsUTC, Ahead: sqlCountAhead.text,
		// Readiness is judged by the database clock unless
		// Options.CallerClock is set, like claims.
		AheadArgs: func(p driver.AheadParams) []any {
			from := sqlutil.NullTime(p.From)
			return sqlCountAhead.args(d.now(p.Now), p.Queue, p.Priority, from, from, p.RunAt, p.RunAt, p.ID, p.Limit)
		},
		DeclareArgs: func(t driver.TypeDefaults, now time.Time) (string, []any) {
			return sqlDeclareType.text, sqlDeclareType.args(d.now(now), sqlutil.TypeArgs(t)...)
		},
		TypesNamed: func(names []string) (string, []any) {
			q := sqlListTypesNamed.with("{names}", "?", len(names), 1)
			return q.text, q.args(nil, appendStrings(nil, names)...)
		},
		RecentArgs: func(p driver.RecentParams) []any {
			since := p.Since.UTC()
			if p.Since.IsZero() {
				since = time.Unix(0, 0).UTC()
			}
			return []any{since, p.Limit, since, p.Limit, p.Limit}
		},
		ScanFinished: func(scan sqlutil.Scan) (*driver.FinishedSample, error) {
			return sqlutil.ScanFinished(scan, sqlutil.UTC, sqlutil.OptUTC)
		},
	}
}
