package enqueue

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/shorten"
)

// ReservedType reports whether a type name belongs to keel's own tasks.
func ReservedType(t string) bool { return strings.HasPrefix(t, KeelTypePrefix) }

// The run times keel accepts, [minRunAt, endRunAt): the range of MariaDB's
// DATETIME(6), the narrowest of the three databases (PostgreSQL's
// timestamptz spans 4713 BC to 294276 AD, SQLite stores Unix microseconds
// in an int64).
var (
	minRunAt = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	endRunAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// CheckRunAt refuses a run time outside the range every database stores
// exactly; how, when not empty, says how the time came about.
func CheckRunAt(t time.Time, how string) error {
	if t.Before(minRunAt) || !t.Before(endRunAt) {
		return kerr.Invalid("run_at %s%s is out of range: use a time in the years 1000 to 9999 (UTC)",
			t.UTC().Format(time.RFC3339Nano), how)
	}
	if t.Equal(driver.HeldUntil) {
		return kerr.Invalid("run_at %s%s is keel's mark of a held task: use an earlier time",
			t.UTC().Format(time.RFC3339Nano), how)
	}
	return nil
}

// CheckTimeFilter refuses a time filter outside the range run_at has, so
// that every database answers it alike (MariaDB's DATETIME cannot even
// compare with year 0); a zero t is no filter and passes.
func CheckTimeFilter(name string, t time.Time) error {
	if !t.IsZero() && (t.Before(minRunAt) || !t.Before(endRunAt)) {
		return kerr.Invalid("%s %s is out of range: use a time in the years 1000 to 9999 (UTC)",
			name, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// CheckTimeFilters runs CheckTimeFilter over name, time pairs.
func CheckTimeFilters(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := CheckTimeFilter(pairs[i].(string), pairs[i+1].(time.Time)); err != nil {
			return err
		}
	}
	return nil
}

// CheckText refuses a string some database cannot store: invalid UTF-8
// (stored replaced, or refused) or the NUL character (refused by
// PostgreSQL).
func CheckText(what, s string) error {
	switch {
	case !utf8.ValidString(s):
		return kerr.Invalid("%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return kerr.Invalid("%s contains the NUL character (\\u0000)", what)
	}
	return nil
}

// checkStored refuses option values that some database cannot store as
// given (NUL, invalid UTF-8), so every database answers alike. Names and
// keys' lengths are checked by Validate.
func checkStored(o Options) error {
	if o.IdemKey != nil {
		if err := CheckText("idempotency key", *o.IdemKey); err != nil {
			return err
		}
	}
	for k, v := range o.Meta {
		if err := CheckText("meta key", k); err != nil {
			return err
		}
		if err := CheckText(fmt.Sprintf("meta %q", shorten.String(k, kerr.MaxEcho)), v); err != nil {
			return err
		}
	}
	return nil
}

// encodePayload encodes a task's payload as JSON; nil is {}.
func encodePayload(payload any, maxBytes int) ([]byte, error) {
	var raw []byte
	switch v := payload.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case nil:
		// No payload is an empty object: a handler decodes it into its
		// struct, and an HTTP target receives a JSON object.
		raw = []byte("{}")
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, kerr.Invalid("payload cannot be encoded as JSON: %v", err)
		}
		raw = b
	}
	if len(raw) > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", kerr.ErrPayloadTooLarge, len(raw), maxBytes)
	}
	return raw, nil
}
