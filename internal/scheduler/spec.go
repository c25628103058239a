package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/keelq/keel/driver"
)

// cronParser reads specs of five or six fields and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a spec in a zone: a cron expression of five fields, or six
// with seconds first, or a descriptor ("@hourly", "@every 90s").
func Parse(spec, zone string) (cron.Schedule, *time.Location, error) {
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, nil, errors.New("spec must not name a zone (TZ=...): set the time zone instead")
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "" || strings.EqualFold(zone, "local") {
		return nil, nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"UTC\" or \"Europe/Berlin\"", zone)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("spec %q: %v", spec, err)
	}
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		// cron runs an interval under a second every second, and cuts
		// the fraction off a longer one: refuse what would not run as
		// written.
		switch d, _ := time.ParseDuration(every); {
		case d < time.Second:
			return nil, nil, fmt.Errorf("spec %q: the interval must be at least 1s", spec)
		case d%time.Second != 0:
			return nil, nil, fmt.Errorf("spec %q: the interval must be whole seconds", spec)
		}
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	return s, loc, nil
}

// Times is where a stored schedule stands, as the API shows it.
type Times struct {
	// LastTick is the row's last tick in the schedule's zone.
	LastTick time.Time
	// NextRun is the next tick after now in the schedule's zone; zero
	// while paused, or when the spec has no further tick.
	NextRun time.Time
	// Due is set when a tick came due that no leader enqueued yet.
	Due bool
	// Error says why this process cannot read the spec or zone; then
	// only LastTick is set, as stored.
	Error string
}

// Describe returns where r stands at now.
func Describe(r *driver.ScheduleRow, now time.Time) Times {
	sched, loc, err := Parse(r.Spec, r.TimeZone)
	if err != nil {
		return Times{LastTick: r.LastTick, Error: err.Error()}
	}
	t := Times{LastTick: r.LastTick.In(loc)}
	if r.Paused {
		return t // no next run until resumed, which restarts the count
	}
	if next := sched.Next(r.LastTick); !next.IsZero() && !next.After(now) {
		t.Due = true
	}
	if next := nextAfter(sched, r.LastTick, now); !next.IsZero() {
		t.NextRun = next.In(loc)
	}
	return t
}

// latestDue returns the latest tick of sched after last that is not after
// now (zero: none is due), and whether more than one came due.
func latestDue(sched cron.Schedule, last, now time.Time) (time.Time, bool) {
	first := sched.Next(last)
	if first.IsZero() || first.After(now) {
		return time.Time{}, false
	}
	second := sched.Next(first)
	if second.IsZero() || second.After(now) {
		return first, false
	}
	if d, ok := sched.(cron.ConstantDelaySchedule); ok {
		n := now.Sub(last) / d.Delay
		return last.Add(n * d.Delay), true
	}
	// Look back from now over growing windows: the latest tick in the
	// first window holding one is the latest of all.
	latest := second
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 0} {
		from := now.Add(-w)
		if w == 0 || from.Before(second) {
			from = second
		}
		for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			latest = t
		}
		if latest.After(second) || from.Equal(second) {
			return latest, true
		}
	}
	return latest, true
}

// nextAfter returns the first tick of sched's sequence from last that is
// after t (zero: none). An "@every" schedule counts from last.
func nextAfter(sched cron.Schedule, last, t time.Time) time.Time {
	if !t.After(last) {
		return sched.Next(last)
	}
	if d, ok := sched.(cron.ConstantDelaySchedule); ok {
		n := t.Sub(last)/d.Delay + 1
		return last.Add(n * d.Delay)
	}
	return sched.Next(t)
}
