package sqlutil

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"testing/fstest"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/migrate"
)

func TestListQueryPlaceholders(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	p := driver.Filter{State: driver.StateDead, Queue: "q", FinishedAfter: at, BeforeID: 9}
	dollar := func(n int) string { return "$" + strconv.Itoa(n) }
	q, args := ListQuery("SELECT x FROM t", p, dollar, func(t time.Time) any { return t.UnixMicro() })
	// The state's implication, in the words of the partial index.
	want := "SELECT x FROM t WHERE state = $1 AND state IN ('dead', 'cancelled') AND queue = $2 AND finished_at >= $3 AND id < $4 ORDER BY id DESC LIMIT $5"
	if q != want {
		t.Errorf("query\n got %s\nwant %s", q, want)
	}
	if wantArgs := []any{"dead", "q", at.UnixMicro(), int64(9), 100}; !reflect.DeepEqual(args, wantArgs) {
		t.Errorf("args %#v, want %#v", args, wantArgs)
	}
	q, _ = ListQuery("SELECT x FROM t", driver.Filter{State: driver.StateRunning}, Question, nil)
	if want := "SELECT x FROM t WHERE state = ? AND state = 'running' AND lease_expires_at IS NOT NULL ORDER BY id DESC LIMIT ?"; q != want {
		t.Errorf("running\n got %s\nwant %s", q, want)
	}
	q, args = ListQuery("SELECT x FROM t", driver.Filter{Limit: 5}, Question, nil)
	if q != "SELECT x FROM t ORDER BY id DESC LIMIT ?" || !reflect.DeepEqual(args, []any{5}) {
		t.Errorf("no filter: %s %v", q, args)
	}
}

func TestMatchArgsRepeat(t *testing.T) {
	before := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	p := driver.Filter{State: driver.StateDead, Type: "email", FinishedBefore: before, Limit: 7}
	if got, want := MatchArgs(p, NullTime, 1), []any{"dead", "email", nil, nil, before, 7}; !reflect.DeepEqual(got, want) {
		t.Errorf("once: %#v, want %#v", got, want)
	}
	want := []any{"dead", "email", "email", nil, nil, nil, nil, before, before, 7}
	if got := MatchArgs(p, NullTime, 2); !reflect.DeepEqual(got, want) {
		t.Errorf("twice: %#v, want %#v", got, want)
	}
}

func TestKeyHolder(t *testing.T) {
	p := driver.InsertParams{PayloadDigest: "a"}
	if res, err := KeyHolder(&driver.TaskRow{ID: 3, PayloadDigest: "a"}, p); err != nil || !res.Duplicate || res.Task.ID != 3 {
		t.Errorf("same payload: %+v %v", res, err)
	}
	if _, err := KeyHolder(&driver.TaskRow{ID: 3, PayloadDigest: "b"}, p); !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Errorf("other payload: %v", err)
	}
	if _, err := KeyHolder(nil, p); err == nil {
		t.Error("vanished holder: no error")
	}
}

// applier records migrations in memory; version 2 is applied by "another
// migrator" between the check and the apply.
type applier struct {
	at      map[int]time.Time
	applied []string
}

func (a *applier) AppliedAt(_ context.Context, v int) (time.Time, bool, error) {
	at, ok := a.at[v]
	if v == 2 {
		return time.Time{}, false, nil
	}
	return at, ok, nil
}

func (a *applier) Apply(_ context.Context, m migrate.Migration) (bool, time.Time, error) {
	if m.Version == 3 {
		return false, time.Time{}, fmt.Errorf("syntax error")
	}
	if at, ok := a.at[m.Version]; ok {
		return false, at, nil
	}
	a.applied = append(a.applied, m.Name)
	return true, time.Unix(int64(m.Version), 0), nil
}

func TestMigrateLoop(t *testing.T) {
	fsys := fstest.MapFS{"m/001_a.sql": {Data: []byte("A")}, "m/002_b.sql": {Data: []byte("B")}}
	a := &applier{at: map[int]time.Time{2: time.Unix(20, 0)}}
	got, err := Migrate(context.Background(), fsys, "m", a)
	if err != nil {
		t.Fatal(err)
	}
	want := []driver.Migration{
		{Version: 1, Name: "001_a.sql", Applied: true, AppliedAt: time.Unix(1, 0)},
		{Version: 2, Name: "002_b.sql", AppliedAt: time.Unix(20, 0)},
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(a.applied, []string{"001_a.sql"}) {
		t.Errorf("got %+v (applied %v), want %+v", got, a.applied, want)
	}
	fsys["m/003_c.sql"] = &fstest.MapFile{Data: []byte("C")}
	if _, err := Migrate(context.Background(), fsys, "m", a); err == nil || err.Error() != "003_c.sql: syntax error" {
		t.Errorf("failing migration: %v", err)
	}
}

func TestInsertOrder(t *testing.T) {
	keys := []string{"b", "", "a", "b", "", "c"}
	params := make([]driver.InsertParams, len(keys))
	for i, k := range keys {
		params[i].IdemKey = k
	}
	// Plain tasks first as given, then by key; of equal keys the first given.
	if got, want := InsertOrder(params), []int{1, 4, 2, 0, 3, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestFinishedTimesTheRunToItsEnd: an attempt's run time in the history
// ends when its handler returned (Transition.Ended), not when the write
// landed; an end outside the attempt (a clock apart) falls back to the
// write's time.
func TestFinishedTimesTheRunToItsEnd(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	write := start.Add(800 * time.Millisecond)
	task := &driver.TaskRow{Queue: "q", Type: "t", State: driver.StateRunning, Attempt: 1, AttemptedAt: start}
	for _, tc := range []struct {
		name  string
		ended time.Time
		want  int64
	}{
		{"ended before the write", start.Add(500 * time.Millisecond), 500},
		{"no end given", time.Time{}, 800},
		{"end after the write", write.Add(time.Second), 800},
		{"end before the attempt", start.Add(-time.Second), 800},
	} {
		var tally Tally
		ends := Ends{}
		ends.Add(driver.Transition{ID: 7, Ended: tc.ended})
		tally.Finished(task, ends.Success(7), write)
		ms := tally.Minutes()
		if len(ms) != 1 || ms[0].Ended != 1 || ms[0].Succeeded != 1 || ms[0].DurationMS != tc.want {
			t.Errorf("%s: minutes %+v, want one success of %d ms", tc.name, ms, tc.want)
		}
	}
}
