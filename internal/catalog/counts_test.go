package catalog

import (
	"reflect"
	"strings"
	"testing"

	"github.com/keelq/keel/driver"
)

func TestQueueCounts(t *testing.T) {
	rows := []driver.CountRow{
		{Queue: "default", Type: "a", Kind: "pending", N: 2},
		{Queue: "default", Type: "b", Kind: driver.KindRetrying, N: 3}, // retrying tasks are pending
		{Queue: "default", Type: "a", Kind: "dead", N: 1},
		{Queue: "mail", Type: "a", Kind: "running", N: 4},
		{Queue: "keel", Type: "keel.notify.log", Kind: "pending", N: 9},
		{Queue: "mail", Type: "keel.drill", Kind: "dead", N: 9},
	}
	keel := func(queue, taskType string) bool { return queue == "keel" || strings.HasPrefix(taskType, "keel.") }
	want := map[string]map[driver.State]int64{
		"default": {driver.StatePending: 5, driver.StateDead: 1},
		"mail":    {driver.StateRunning: 4},
	}
	if got := QueueCounts(rows, keel); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if got := QueueCounts(nil, keel); got == nil || len(got) != 0 {
		t.Fatalf("no rows: %v, want an empty map", got)
	}
}
