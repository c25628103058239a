package conv

import (
	"reflect"
	"strconv"
	"testing"
)

func TestSlice(t *testing.T) {
	if got := Slice([]int{3, 1, 2}, strconv.Itoa); !reflect.DeepEqual(got, []string{"3", "1", "2"}) {
		t.Errorf("Slice: %q", got)
	}
	if got := Slice(nil, strconv.Itoa); got != nil {
		t.Errorf("Slice of nil: %#v, want nil", got)
	}
	if got := Slice([]int{}, strconv.Itoa); got == nil || len(got) != 0 {
		t.Errorf("Slice of empty: %#v, want empty, not nil", got)
	}
}

func TestRows(t *testing.T) {
	rows := []int{3, 1}
	if got := Rows(rows, func(r *int) *int { return r }); len(got) != 2 || got[0] != &rows[0] || got[1] != &rows[1] {
		t.Errorf("Rows: %v, want pointers to the rows", got)
	}
	if got := Rows(nil, func(r *int) int { return *r }); got == nil || len(got) != 0 {
		t.Errorf("Rows of nil: %#v, want empty, not nil", got)
	}
}

func TestKeys(t *testing.T) {
	type state string
	if got := Keys[state](map[string]int64{"dead": 2, "pending": 1}); !reflect.DeepEqual(got, map[state]int64{"dead": 2, "pending": 1}) {
		t.Errorf("Keys: %v", got)
	}
	if got := Keys[state, int64](nil); got == nil || len(got) != 0 {
		t.Errorf("Keys of nil: %#v, want empty, not nil", got)
	}
}
