package catalog_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/catalog"
)

var _ catalog.Store = driver.Driver(nil) // the real drivers fit

// store serves fixed rows; failing names the read that fails.
type store struct {
	counts   []driver.CountRow
	settings []driver.Setting
	declared []driver.TypeDefaults
	failing  string
}

var errDown = errors.New("down")

func (s *store) fail(read string) error {
	if s.failing == read {
		return errDown
	}
	return nil
}

func (s *store) Counts(context.Context) ([]driver.CountRow, error) {
	return s.counts, s.fail("counts")
}

func (s *store) ListSettings(context.Context) ([]driver.Setting, error) {
	return s.settings, s.fail("settings")
}

func (s *store) ListTypes(_ context.Context, names []string) ([]driver.TypeDefaults, error) {
	if names != nil {
		panic("Types lists every declared type")
	}
	return s.declared, s.fail("types")
}

// braking is a store that also keeps brakes.
type braking struct {
	store
	brakes []driver.BrakeRow
}

func (b *braking) ListBrakes(context.Context) ([]driver.BrakeRow, error) {
	return b.brakes, b.fail("brakes")
}
func (b *braking) ChangeBrake(context.Context, driver.BrakeChange) (bool, error) {
	panic("a listing only reads")
}
func (b *braking) SetBrakeConfig(context.Context, driver.BrakeConfigParams) error {
	panic("a listing only reads")
}

var updated = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func rows() store {
	return store{
		counts: []driver.CountRow{
			{Queue: "mail", Type: "send", Kind: string(driver.StatePending), N: 3},
			{Queue: "mail", Type: "send", Kind: driver.KindRetrying, N: 2, Priority: 1},
			{Queue: "mail", Type: "send", Kind: string(driver.StateRunning), N: 1},
			{Queue: "bulk", Type: "export", Kind: string(driver.StateDead), N: 4},
		},
		settings: []driver.Setting{
			{Kind: driver.SettingQueue, Name: "idle", Paused: true, Concurrency: 5, Rate: 2.5, Burst: 3, UpdatedAt: updated},
			{Kind: driver.SettingQueue, Name: "mail", Concurrency: 7, UpdatedAt: updated},
			{Kind: driver.SettingType, Name: "send", Paused: true, Timeout: time.Minute, MaxAttempts: 3,
				BackoffBase: time.Second, BackoffMax: time.Hour, Rate: 1, Burst: 2, UpdatedAt: updated},
			{Kind: driver.SettingType, Name: "mail", Concurrency: 99}, // a type's setting, not the queue's
		},
		declared: []driver.TypeDefaults{{Name: "export", OnDead: "notify"}, {Name: "plain"}},
	}
}

// TestQueues: a queue is listed when the client works it (with its
// workers), when it holds tasks (retrying ones count as pending) or when
// it has settings; type settings do not make queues; ordered by name.
func TestQueues(t *testing.T) {
	s := rows()
	got, err := catalog.Lister{Store: &s}.Queues(context.Background(), map[string]int{"default": 4, "mail": 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.Queue{
		{Name: "bulk", Counts: map[driver.State]int64{driver.StateDead: 4}},
		{Name: "default", Counts: map[driver.State]int64{}, MaxWorkers: 4},
		{Name: "idle", Counts: map[driver.State]int64{}, Paused: true, Concurrency: 5, Rate: 2.5, Burst: 3, UpdatedAt: updated},
		{Name: "mail", Counts: map[driver.State]int64{driver.StatePending: 5, driver.StateRunning: 1}, Concurrency: 7,
			UpdatedAt: updated, MaxWorkers: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("queues\n got %+v\nwant %+v", got, want)
	}
}

// TestTypes: a type is listed when the client knows it, when it holds
// tasks, has settings (a paused one), a declared on_dead follow-up or a
// stored brake; a declared type with neither is not; ordered by name.
func TestTypes(t *testing.T) {
	open := driver.BrakeRow{Type: "flaky", State: driver.BrakeOpen, OpenedAt: updated, Until: updated.Add(time.Minute), Ratio: 0.9, Attempts: 20}
	s := &braking{store: rows(), brakes: []driver.BrakeRow{open}}
	got, err := catalog.Lister{Store: s}.Types(context.Background(), []string{"known", "send"})
	if err != nil {
		t.Fatal(err)
	}
	none := map[driver.State]int64{}
	want := []catalog.Type{
		{Name: "export", Counts: map[driver.State]int64{driver.StateDead: 4}, OnDead: "notify"},
		{Name: "flaky", Counts: none, Brake: open},
		{Name: "known", Counts: none},
		{Name: "mail", Counts: none, Concurrency: 99},
		{Name: "send", Counts: map[driver.State]int64{driver.StatePending: 5, driver.StateRunning: 1}, Paused: true,
			Timeout: time.Minute, MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: time.Hour, Rate: 1, Burst: 2, UpdatedAt: updated},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("types\n got %+v\nwant %+v", got, want)
	}

	// A store that keeps no brakes lists the same types but the braked one.
	plain := rows()
	got, err = catalog.Lister{Store: &plain}.Types(context.Background(), []string{"known", "send"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want)-1 || got[1].Name != "known" {
		t.Errorf("without brakes: %+v", got)
	}
}

// TestSettingOf: an updated queue or type is its setting under the name
// asked for, with no counts.
func TestSettingOf(t *testing.T) {
	s := driver.Setting{Kind: driver.SettingType, Paused: true, Concurrency: 2, Rate: 3, Burst: 4, Timeout: time.Second,
		MaxAttempts: 5, BackoffBase: time.Millisecond, BackoffMax: time.Minute, UpdatedAt: updated}
	q := catalog.QueueOf("q", s, 8)
	if want := (catalog.Queue{Name: "q", Counts: map[driver.State]int64{}, Paused: true, Concurrency: 2, Rate: 3, Burst: 4,
		UpdatedAt: updated, MaxWorkers: 8}); !reflect.DeepEqual(q, want) {
		t.Errorf("queue %+v, want %+v", q, want)
	}
	ty := catalog.TypeOf("t", s)
	if want := (catalog.Type{Name: "t", Counts: map[driver.State]int64{}, Paused: true, Concurrency: 2, Rate: 3, Burst: 4,
		Timeout: time.Second, MaxAttempts: 5, BackoffBase: time.Millisecond, BackoffMax: time.Minute, UpdatedAt: updated}); !reflect.DeepEqual(ty, want) {
		t.Errorf("type %+v, want %+v", ty, want)
	}
}

// TestReadErrors: a failed read names what was read and passes through
// Wrap.
func TestReadErrors(t *testing.T) {
	errWrapped := errors.New("wrapped")
	wrap := func(_ context.Context, err error) error { return errors.Join(errWrapped, err) }
	for read, what := range map[string]string{"counts": "keel: count tasks: ", "settings": "keel: list settings: ",
		"types": "keel: list declared types: ", "brakes": "keel: list brakes: "} {
		s := &braking{store: rows()}
		s.failing = read
		l := catalog.Lister{Store: s, Wrap: wrap}
		_, err := l.Types(context.Background(), nil)
		if !errors.Is(err, errDown) || !errors.Is(err, errWrapped) || !strings.HasPrefix(err.Error(), what) {
			t.Errorf("types, %s failing: %v", read, err)
		}
		_, err = l.Queues(context.Background(), nil)
		if failsQueues := read == "counts" || read == "settings"; failsQueues != (err != nil) {
			t.Errorf("queues, %s failing: %v", read, err)
		}
	}
}
