package enqueue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

func TestBulkFilter(t *testing.T) {
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	f, err := BulkFilter(driver.Filter{Type: "mail.send", FinishedBefore: at})
	if err != nil || f.State != driver.StateDead || f.Limit != 1000 || f.Type != "mail.send" || !f.FinishedBefore.Equal(at) {
		t.Fatalf("defaults: %+v, %v", f, err)
	}
	if f, err := BulkFilter(driver.Filter{State: driver.StateCancelled, Limit: 10000, IDs: []int64{3, 1}}); err != nil ||
		f.State != driver.StateCancelled || f.Limit != 10000 {
		t.Fatalf("cancelled, 10000: %+v, %v", f, err)
	}
	for _, c := range []struct {
		f    driver.Filter
		want string
	}{
		{driver.Filter{FinishedAfter: time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC)}, "finished_after 0999-01-01T00:00:00Z is out of range"},
		{driver.Filter{Type: "bad type"}, `invalid task type "bad type"`},
		{driver.Filter{Queue: "bad/queue"}, `invalid queue name "bad/queue"`},
		{driver.Filter{FinishedAfter: at, FinishedBefore: at}, "finished_after must be before finished_before"},
		{driver.Filter{State: driver.StatePending}, `filter state must be dead or cancelled, got "pending"`},
		{driver.Filter{Limit: 10001}, "filter limit must be in 1..10000, got 10001"},
		{driver.Filter{Limit: -1}, "filter limit must be in 1..10000, got -1"},
		{driver.Filter{CreatedAfter: at}, "filter created_after and created_before do not apply"},
		{driver.Filter{BeforeID: 5}, "filter before_id and after_id do not apply"},
		{driver.Filter{IDs: make([]int64, driver.MaxBulkIDs+1)}, "filter at most 1000 ids at once"},
	} {
		_, err := BulkFilter(c.f)
		if !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), "keel: invalid input: "+c.want) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
}
