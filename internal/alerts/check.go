package alerts

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/check"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/kerr"
)

// notifierName is the form of a notifier's name.
var notifierName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidNotifierName reports whether name is a valid notifier name: 1–64
// of a-z, 0-9, '_' and '-', starting with a letter or digit.
func ValidNotifierName(name string) bool { return notifierName.MatchString(name) }

// Configured is one of keel.Config.Alerts.Notifiers as CheckConfig sees
// it; nil stands for a nil notifier.
type Configured struct {
	Name string
	// Validate is the notifier's own check (a webhook's URL); nil: none.
	Validate func() error
}

// CheckConfig checks a process's alert settings after their defaults:
// the rules, interval and retryMax, then each notifier in order (set,
// named validly and once, "log" being keel's own, and passing its own
// check), with the errors keel.NewClient returns.
func CheckConfig(rules Rules, interval, retryMax time.Duration, notifiers []*Configured) error {
	if err := rules.Validate(); err != nil {
		return err
	}
	if interval < 0 || retryMax < 0 {
		return kerr.Invalid("Config.Alerts: Interval and RetryMax must be positive, got %v and %v", interval, retryMax)
	}
	seen := map[string]bool{LogNotifier: true}
	for i, n := range notifiers {
		switch {
		case n == nil:
			return kerr.Invalid("Config.Alerts.Notifiers[%d] is nil", i)
		case !ValidNotifierName(n.Name):
			return kerr.Invalid("Config.Alerts.Notifiers[%d]: invalid name %q: use 1-64 of a-z, 0-9, '_' and '-'", i, n.Name)
		case seen[n.Name]:
			return kerr.Invalid("Config.Alerts.Notifiers[%d]: name %q used twice (\"log\" is keel's own)", i, n.Name)
		}
		seen[n.Name] = true
		if n.Validate != nil {
			if err := n.Validate(); err != nil {
				return kerr.Invalid("Config.Alerts.Notifiers[%d]: %v", i, err)
			}
		}
	}
	return nil
}

// CheckFilter checks a listing of alerts (keel.Client.Alerts), after
// giving it the default limit of 100.
func CheckFilter(f *driver.AlertFilter) error {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if err := enqueue.CheckTimeFilter("fired_after", f.Since); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return kerr.Invalid("%v", err)
	}
	return nil
}

// Validate rejects rules that cannot be evaluated, with the rules
// `keel config check` applies to [alerts] (package check): every invalid
// field, one a line.
func (r Rules) Validate() error {
	var errs []error
	check.Alerts(check.AlertRules{DeadPerHour: r.DeadPerHour, OldestReadyAge: r.OldestReadyAge, FailureRatio: r.FailureRatio,
		FailureMinAttempts: r.FailureMinAttempts, FailureWindow: r.FailureWindow}, func(field, problem string) {
		errs = append(errs, errors.New(field+" "+problem))
	})
	if len(errs) > 0 {
		return kerr.Invalid("alert rules: %v", errors.Join(errs...))
	}
	return nil
}

// ListStore is the alerts table as keel.Client.Alerts and GetAlert read
// it.
type ListStore interface {
	ListAlerts(ctx context.Context, filter driver.AlertFilter) ([]driver.AlertRow, error)
	GetAlert(ctx context.Context, id int64) (*driver.AlertRow, error)
}

// List checks f (see CheckFilter) and lists the alerts it selects, newest
// first; wrap classifies the store's error.
func List(ctx context.Context, s ListStore, f driver.AlertFilter, wrap func(context.Context, error) error) ([]driver.AlertRow, error) {
	if err := CheckFilter(&f); err != nil {
		return nil, err
	}
	rows, err := s.ListAlerts(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("keel: list alerts: %w", wrap(ctx, err))
	}
	return rows, nil
}

// Get loads one alert; an error wrapping driver.ErrNotFound
// (keel.ErrNotFound) when there is none.
func Get(ctx context.Context, s ListStore, id int64, wrap func(context.Context, error) error) (*driver.AlertRow, error) {
	row, err := s.GetAlert(ctx, id)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return nil, fmt.Errorf("%w: no alert %d", driver.ErrNotFound, id)
	case err != nil:
		return nil, fmt.Errorf("keel: get alert: %w", wrap(ctx, err))
	}
	return row, nil
}
