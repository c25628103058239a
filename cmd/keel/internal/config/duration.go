package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in TOML and environment variables as
// a string: a Go duration ("30s", "1h30m") or whole days ("30d").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d without trailing zero units: "30s", "1h30m", "30d".
func (d Duration) String() string {
	v := time.Duration(d)
	const day = 24 * time.Hour
	if v >= day && v%day == 0 {
		return fmt.Sprintf("%dd", v/day)
	}
	s := v.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ParseDuration reads a Go duration ("30s", "1h30m") or whole days ("7d").
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid duration %q: use a form such as \"30s\", \"5m\", \"1h30m\" or \"7d\"", s)
		}
		return Duration(time.Duration(n) * 24 * time.Hour), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use a form such as \"30s\", \"5m\", \"1h30m\" or \"7d\"", s)
	}
	return Duration(v), nil
}

// UnmarshalTOML accepts only strings: a bare number would be ambiguous.
// An empty string is 0 (off, for a setting where 0 means off such as
// retention.archive; a setting that must be positive says so).
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("duration must be a string such as \"30s\", got %v", v)
	}
	p, err := parseSetting(s)
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// MarshalText writes the duration as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// parseSetting is ParseDuration for a setting's value: an empty string is 0.
func parseSetting(s string) (Duration, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	return ParseDuration(s)
}
