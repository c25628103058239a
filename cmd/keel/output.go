package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keelq/keel/cmd/keel/internal/config"
)

// now is the clock of the operator commands' relative times.
var now = time.Now

// newTable returns a tabwriter for aligned columns; call Flush.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// printRaw writes an API answer as it came, one JSON document per line.
func printRaw(w io.Writer, b []byte) error {
	_, err := w.Write(append(bytes.TrimRight(b, "\n"), '\n'))
	return err
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return printRaw(w, b)
}

// stamp formats a time for tables: local, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// stampMilli formats a time for timelines: local, to the millisecond.
func stampMilli(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05.000 MST") }

// ago says how far t is from now: "3s ago", "in 2m".
func ago(t time.Time) string {
	d := now().Sub(t)
	if d >= 0 {
		return short(d) + " ago"
	}
	return "in " + short(-d)
}

// short formats a duration compactly: 0.4ms, 850ms, 3.2s, 4m10s, 2h5m, 3d.
// Below a millisecond it keeps a tenth of one (<0.1ms below 50µs), so a
// quick attempt does not read as taking no time.
func short(d time.Duration) string {
	sub := d.Round(100 * time.Microsecond)
	switch {
	case d < 0:
		return "-" + short(-d)
	case d == 0:
		return "0s"
	case sub == 0:
		return "<0.1ms"
	case sub < time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(sub)/float64(time.Millisecond))
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 24*time.Hour:
		return config.Duration(d.Round(time.Second)).String()
	}
	return config.Duration(d.Round(time.Hour)).String()
}

// parseWhen reads a point in time for --since, --before and --after: an
// RFC 3339 time, or a duration before now ("2h", "7d").
func parseWhen(flag, s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := config.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration before now (90m, 2h, 7d), got %q", flag, s)
	}
	return now().Add(-d.D()), nil
}

// oneLine squeezes an error message onto one line of at most n bytes.
func oneLine(s string, n int) string {
	return truncate(strings.Join(strings.Fields(s), " "), n)
}

// isTerminal reports whether w is a terminal (for progress bars).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// count returns counts[state] formatted, "0" when absent.
func count(counts map[string]int64, state string) string { return fmt.Sprint(counts[state]) }
