package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/keelq/keel/driver"
)

// TEMPORARY: placeholders so the tree compiles while the real queries are
// written; every one of them is replaced before this lands.
var errTODO = errors.New("postgres: not implemented yet")

func (d *Driver) CountFinished(ctx context.Context, since time.Time) ([]driver.QueueCount, error) {
	return nil, errTODO
}
func (d *Driver) CountAhead(ctx context.Context, p driver.AheadParams) (int64, error) {
	return 0, errTODO
}
func (d *Driver) RetryMatching(ctx context.Context, p driver.MatchParams, now time.Time) (int64, error) {
	return 0, errTODO
}
func (d *Driver) PurgeMatching(ctx context.Context, p driver.MatchParams) (int64, error) {
	return 0, errTODO
}
func (d *Driver) PatchSetting(ctx context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	return nil, errTODO
}
func (d *Driver) ListSettings(ctx context.Context) ([]driver.Setting, error) {
	return nil, errTODO
}
