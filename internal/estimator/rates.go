package estimator

import (
	"time"

	"github.com/keelq/keel/driver"
)

// FinishedIn counts a minute's tasks that finished (succeeded or dead).
func FinishedIn(m driver.MinuteRow) int64 { return m.Succeeded + m.Dead }

// ClaimedIn counts a minute's claimed attempts.
func ClaimedIn(m driver.MinuteRow) int64 { return m.Attempts }

// Rates are count per second over the busy time of the last 1, 5 and 15
// minutes.
func Rates(hist []driver.MinuteRow, now time.Time, count func(driver.MinuteRow) int64) (m1, m5, m15 float64) {
	return BusyRate(hist, now, time.Minute, count).PerSecond,
		BusyRate(hist, now, 5*time.Minute, count).PerSecond,
		BusyRate(hist, now, 15*time.Minute, count).PerSecond
}

// Rate is a count over the busy time of a window.
type Rate struct {
	N         float64
	Busy      time.Duration
	PerSecond float64
}

// BusyRate is count per second over the time within the window that the
// history shows work in: a minute with work before and after it counts
// whole; at the edge of a stretch of work only from the minute's first or
// to its last ended attempt (to now in the current minute), and a first
// minute with no ended attempt only with its counts. The counts of a
// minute partly inside the window count in proportion.
func BusyRate(hist []driver.MinuteRow, now time.Time, window time.Duration, count func(driver.MinuteRow) int64) Rate {
	var r Rate
	from := now.Add(-window)
	nowMinute := driver.DueMinute(now)
	active := map[int64]bool{}
	for _, m := range hist {
		active[m.Minute] = m.Attempts > 0 || m.Ended > 0
	}
	for _, m := range hist {
		n := count(m)
		if !active[m.Minute] {
			continue
		}
		start := time.Unix(m.Minute*60, 0)
		end := start.Add(time.Minute)
		lo, hi := start, end
		if !active[m.Minute-1] {
			// A stretch of work starts at its first ended attempt. A
			// minute with claims but none ended (their attempts end in
			// the next minute) adds its claims and no time: counted from
			// the minute's start, a burst begun in its last second was
			// given the idle 59 before it as busy time.
			lo = minTime(end, now)
			if m.FirstMS != 0 {
				lo = time.UnixMilli(m.FirstMS)
			}
		}
		switch {
		case m.Minute >= nowMinute:
			hi = now
		case !active[m.Minute+1] && m.LastMS != 0:
			hi = time.UnixMilli(m.LastMS)
		}
		if hi.Before(lo) {
			hi = lo
		}
		span := hi.Sub(lo)
		clo, chi := maxTime(lo, from), minTime(hi, now)
		if !chi.After(clo) {
			if span == 0 && !lo.Before(from) && !lo.After(now) {
				r.N += float64(n)
			}
			continue
		}
		kept := chi.Sub(clo)
		r.Busy += kept
		if span > 0 {
			r.N += float64(n) * float64(kept) / float64(span)
		}
	}
	if r.Busy >= time.Second && r.N > 0 {
		r.PerSecond = r.N / r.Busy.Seconds()
	}
	return r
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Drain is how long ready tasks take to start at r; 0 without a rate.
func Drain(ready int64, r Rate) time.Duration {
	if ready <= 0 || r.PerSecond <= 0 {
		return 0
	}
	return time.Duration(float64(ready) / r.PerSecond * float64(time.Second))
}
