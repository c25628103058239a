package enqueue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

func TestCheckList(t *testing.T) {
	old, t1, t2 := time.Date(900, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(100, 0), time.Unix(200, 0)
	for _, c := range []struct {
		f    driver.Filter
		want string
	}{
		{driver.Filter{}, ""},
		{driver.Filter{State: driver.StateDead, Limit: 1000, BeforeID: 5, Type: "t", Types: []string{"keel.*"},
			CreatedAfter: t1, CreatedBefore: t2, FinishedAfter: t1}, ""},
		{driver.Filter{State: "nope"}, `unknown state "nope": use pending, running, succeeded, dead or cancelled`},
		{driver.Filter{Limit: -1}, "limit must be in 0..1000, got -1"},
		{driver.Filter{Limit: 1001}, "limit must be in 0..1000, got 1001"},
		{driver.Filter{IDs: []int64{}}, "ids select tasks for RetryMatching and PurgeMatching only; use Get for one task"},
		{driver.Filter{AfterID: -2}, "before_id and after_id must not be negative, got 0 and -2"},
		{driver.Filter{CreatedAfter: old}, "created_after 0900-01-01T00:00:00Z is out of range: use a time in the years 1000 to 9999 (UTC)"},
		{driver.Filter{FinishedBefore: old}, "finished_before 0900-01-01T00:00:00Z is out of range: use a time in the years 1000 to 9999 (UTC)"},
		{driver.Filter{CreatedAfter: t1, CreatedBefore: t1}, "created_after must be before created_before"},
		{driver.Filter{FinishedAfter: t2, FinishedBefore: t1}, "finished_after must be before finished_before"},
		{driver.Filter{Type: "a\x00"}, `type filter contains the NUL character (\u0000)`},
		{driver.Filter{Queue: "\xff"}, "queue filter is not valid UTF-8"},
		{driver.Filter{ExcludeQueues: []string{""}},
			`invalid excluded queue "": a name is 1-128 letters, digits, '_', '.', ':' or '-', and may end in * to match every name that starts with it`},
		// The first problem is the one named.
		{driver.Filter{State: "nope", Limit: -1}, `unknown state "nope": use pending, running, succeeded, dead or cancelled`},
		{driver.Filter{Limit: -1, CreatedAfter: old}, "limit must be in 0..1000, got -1"},
	} {
		err := CheckList(c.f)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.f, err)
		case c.want != "" && (!errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+c.want):
			t.Errorf("%+v: %v, want ErrInvalid: %s", c.f, err, c.want)
		}
	}
}

func TestCheckKey(t *testing.T) {
	for key, want := range map[string]string{
		"k":                      "",
		strings.Repeat("k", 255): "",
		"":                       "idempotency key must be 1-255 bytes, got 0",
		strings.Repeat("k", 256): "idempotency key must be 1-255 bytes, got 256",
		"a\x00b":                 `idempotency key contains the NUL character (\u0000)`,
		"\xff":                   "idempotency key is not valid UTF-8",
	} {
		err := CheckKey(key)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", key, err)
		case want != "" && (!errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+want):
			t.Errorf("%q: %v, want %s", key, err, want)
		}
	}
}
