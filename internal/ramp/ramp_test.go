package ramp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/ramp"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_ ramp.Store    = driver.Driver(nil) // the real drivers fit
	_ ramp.Settings = driver.Driver(nil)
	// t0 is half a minute into a minute, so the step's own minute began
	// before it.
	t0 = time.Date(2031, 3, 3, 12, 0, 30, 0, time.UTC)
)

const every = time.Minute

// store is a fake driver: ramp documents by name, the attempts by minute
// (rows), and the settings listed. Each Minutes call is sent on since,
// each PutMeta on puts, each PatchSetting on patches.
type store struct {
	mu       sync.Mutex
	docs     map[string][]byte
	rows     []driver.MinuteRow
	settings []driver.Setting
	listErr  error
	since    chan time.Time
	puts     chan ramp.State
	patches  chan driver.SettingPatch
	gets     chan string
	lists    chan struct{}
}

func (s *store) GetMeta(_ context.Context, name string) ([]byte, error) {
	s.gets <- name
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[name], nil
}

func (s *store) PutMeta(_ context.Context, name string, value []byte, _ time.Time) error {
	var st ramp.State
	if err := json.Unmarshal(value, &st); err != nil {
		return err
	}
	s.mu.Lock()
	s.docs[name] = value
	s.mu.Unlock()
	s.puts <- st
	return nil
}

func (s *store) Minutes(_ context.Context, since time.Time) ([]driver.MinuteRow, error) {
	s.since <- since
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows, nil
}

func (s *store) ListSettings(context.Context) ([]driver.Setting, error) {
	s.lists <- struct{}{}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings, s.listErr
}

func (s *store) PatchSetting(_ context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	s.patches <- p
	return &driver.Setting{Kind: p.Kind, Name: p.Name, Concurrency: *p.Concurrency, UpdatedAt: p.Now}, nil
}

// minute returns the history row of typ in the minute m minutes after
// t0's.
func minute(typ string, m int64, ended, failed int64) driver.MinuteRow {
	return driver.MinuteRow{Minute: driver.DueMinute(t0) + m, Type: typ, Queue: "default", Ended: ended, Failed: failed}
}

type bundle struct {
	clk     *servicetest.Clock
	drv     *store
	leading atomic.Bool
	checks  chan bool
	applied chan driver.Setting
	cfg     ramp.Config
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{
		clk: servicetest.NewClock(t0),
		drv: &store{docs: map[string][]byte{}, since: make(chan time.Time, 100), puts: make(chan ramp.State, 100),
			patches: make(chan driver.SettingPatch, 100), gets: make(chan string, 100), lists: make(chan struct{}, 100)},
		checks:  make(chan bool, 100),
		applied: make(chan driver.Setting, 100),
	}
	b.cfg = ramp.Config{
		Driver: b.drv, Settings: b.drv, Interval: 5 * time.Second, Clock: b.clk,
		Leading: func() bool {
			v := b.leading.Load()
			b.checks <- v
			return v
		},
		Applied: func(s driver.Setting) { b.applied <- s },
	}
	return b
}

// start stores a ramp of "email" begun at t0, as StartRamp does.
func (b *bundle) start(t *testing.T, steps []int, minAttempts int, ratio float64) {
	t.Helper()
	st := ramp.State{Type: "email", Plan: ramp.Plan{Steps: steps, Every: every, MaxFailureRatio: ratio, MinAttempts: minAttempts},
		StepAt: t0, NextAt: t0.Add(every), StartedAt: t0, UpdatedAt: t0}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	b.drv.docs[ramp.Doc("email")] = raw
	b.drv.settings = append(b.drv.settings, driver.Setting{Kind: driver.SettingType, Name: "email", Concurrency: steps[0]})
}

// pass moves the clock to t0+d and judges once.
func (b *bundle) pass(t *testing.T, d time.Duration) {
	t.Helper()
	b.clk.Advance(t0.Add(d).Sub(b.clk.Now()))
	if err := ramp.New(b.cfg).RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestNotDueNotJudged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, []int{1, 2}, 5, 0.2)
	b.drv.rows = []driver.MinuteRow{minute("email", 1, 100, 0)}
	b.pass(t, every-time.Second)
	servicetest.None(t, b.drv.since)
	servicetest.None(t, b.drv.puts)
}

// Too few attempts: the ramp waits and says so, stored once however
// often it is judged.
func TestTooFewAttemptsWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, []int{1, 2}, 5, 0.2)
	b.drv.rows = []driver.MinuteRow{minute("email", 1, 4, 0)}
	b.pass(t, every)
	st := servicetest.Recv(t, b.drv.puts)
	if st.Note != "waiting for 5 attempts at concurrency 1, 4 so far" || st.Step != 0 || !st.Active() || !st.UpdatedAt.Equal(t0.Add(every)) {
		t.Fatalf("state %+v", st)
	}
	b.pass(t, every+10*time.Second)
	servicetest.None(t, b.drv.puts)
	servicetest.None(t, b.drv.patches)
}

// A step with enough attempts and few failures advances: the next
// concurrency is written and applied at once, and the next judgement is
// one Every on.
func TestAdvanceThenDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, []int{1, 2, 3}, 5, 0.2)
	b.drv.rows = []driver.MinuteRow{minute("email", 1, 5, 1)} // 0.2: at the bound, not above
	b.pass(t, every)
	now := t0.Add(every)
	if since := servicetest.Recv(t, b.drv.since); !since.Equal(time.Date(2031, 3, 3, 12, 1, 0, 0, time.UTC)) {
		t.Fatalf("first judgement read history since %v", since)
	}
	p := servicetest.Recv(t, b.drv.patches)
	if p.Kind != driver.SettingType || p.Name != "email" || *p.Concurrency != 2 || !p.Now.Equal(now) {
		t.Fatalf("patch %+v", p)
	}
	if s := servicetest.Recv(t, b.applied); s.Name != "email" || s.Concurrency != 2 {
		t.Fatalf("applied %+v", s)
	}
	st := servicetest.Recv(t, b.drv.puts)
	if st.Step != 1 || !st.StepAt.Equal(now) || !st.NextAt.Equal(now.Add(every)) || st.Note != "" || st.Done || st.Stopped {
		t.Fatalf("state after the first advance %+v", st)
	}

	// The second step is judged on the minutes after its own.
	b.drv.rows = []driver.MinuteRow{minute("email", 1, 5, 1), minute("email", 2, 5, 0)}
	b.pass(t, 2*every)
	if since := servicetest.Recv(t, b.drv.since); !since.Equal(time.Unix((driver.DueMinute(now)+1)*60, 0)) {
		t.Fatalf("second judgement read history since %v", since)
	}
	if p := servicetest.Recv(t, b.drv.patches); *p.Concurrency != 3 {
		t.Fatalf("patch to %d, want 3", *p.Concurrency)
	}
	servicetest.Recv(t, b.applied)
	if st = servicetest.Recv(t, b.drv.puts); st.Step != 2 || !st.Done || st.Active() || st.Concurrency() != 3 {
		t.Fatalf("state after the last step %+v", st)
	}

	// Done: never judged again.
	b.pass(t, 10*every)
	servicetest.None(t, b.drv.since)
	servicetest.None(t, b.drv.puts)
}

// A failure ratio above the bound stops the ramp where it stands and
// says why; the concurrency is not touched.
func TestFailureRatioStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, []int{1, 2, 5}, 8, 0.25)
	b.drv.rows = []driver.MinuteRow{minute("email", 1, 8, 4)}
	b.pass(t, every)
	st := servicetest.Recv(t, b.drv.puts)
	want := "failure ratio 0.50 (4 of 8 attempts) at concurrency 1 is above 0.25; concurrency stays 1"
	if !st.Stopped || st.Active() || st.Step != 0 || st.Reason != want || st.Note != "" {
		t.Fatalf("state %+v, want stopped: %s", st, want)
	}
	servicetest.None(t, b.drv.patches)
	b.pass(t, 5*every)
	servicetest.None(t, b.drv.puts)
}

// The judgement counts the type's attempts that ended in the whole
// minutes after the step's minute: the step's own minute (attempts of
// the step before) and other types do not count.
func TestWindowWholeMinutesAfterStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, []int{1, 2}, 4, 0.25)
	b.drv.rows = []driver.MinuteRow{
		minute("email", -1, 50, 0), // before the step
		minute("email", 0, 50, 0),  // the step's own minute
		minute("sms", 1, 50, 50),   // another type
		minute("email", 1, 2, 1),
		minute("email", 2, 2, 1),
	}
	b.pass(t, 2*every)
	if since, want := servicetest.Recv(t, b.drv.since), time.Date(2031, 3, 3, 12, 1, 0, 0, time.UTC); !since.Equal(want) {
		t.Fatalf("history read since %v, want the minute after the step's, %v", since, want)
	}
	st := servicetest.Recv(t, b.drv.puts)
	if !st.Stopped || !strings.Contains(st.Reason, "(2 of 4 attempts)") {
		t.Fatalf("state %+v, want stopped on 2 of 4", st)
	}
}

// Only type settings name ramps; a type without a ramp is passed over.
func TestListsTypesOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.drv.settings = []driver.Setting{{Kind: driver.SettingQueue, Name: "email"}, {Kind: driver.SettingType, Name: "sms"}}
	b.pass(t, every)
	if name := servicetest.Recv(t, b.drv.gets); name != ramp.Doc("sms") || name != "ramp:sms" {
		t.Fatalf("read %q", name)
	}
	servicetest.None(t, b.drv.gets)
	servicetest.None(t, b.drv.since)
}

func TestBadDocumentFailsPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, []int{1, 2}, 5, 0.2)
	b.drv.docs[ramp.Doc("email")] = []byte(`{"type":"email","steps":[1,2],"step":2}`)
	err := ramp.New(b.cfg).RunOnce(context.Background())
	if err == nil || err.Error() != "read ramp of email: step 2 of 2" {
		t.Fatalf("pass returned %v", err)
	}
	var st ramp.State
	if err := ramp.Decode([]byte(`{"steps":[]}`), &st); err == nil {
		t.Fatal("a ramp without steps decoded")
	}
}

// Only the leader judges; the loop judges every Interval.
func TestLoopLeaderOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, []int{1, 2}, 1, 0.2)
	b.drv.rows = []driver.MinuteRow{minute("email", 1, 1, 0)}
	b.clk.Advance(every)
	j := ramp.New(b.cfg)
	j.Start(context.Background())
	t.Cleanup(j.Stop)
	if servicetest.Recv(t, b.checks) {
		t.Fatal("leading")
	}
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(b.cfg.Interval)
	servicetest.Recv(t, b.checks)
	servicetest.None(t, b.drv.gets)
	b.leading.Store(true)
	b.clk.Advance(b.cfg.Interval)
	servicetest.Recv(t, b.checks)
	if p := servicetest.Recv(t, b.drv.patches); *p.Concurrency != 2 {
		t.Fatalf("patch %+v", p)
	}
	servicetest.Recv(t, b.drv.puts)
}

// A failed pass is retried at the next Interval.
func TestLoopRetriesFailedPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading.Store(true)
	b.drv.listErr = errors.New("connection refused")
	b.drv.settings = []driver.Setting{{Kind: driver.SettingType, Name: "email"}}
	j := ramp.New(b.cfg)
	j.Start(context.Background())
	t.Cleanup(j.Stop)
	servicetest.Recv(t, b.checks)
	servicetest.Recv(t, b.drv.lists) // the first pass failed
	b.drv.mu.Lock()
	b.drv.listErr = nil
	b.drv.mu.Unlock()
	b.clk.WaitForWaiters(t, 1)
	servicetest.None(t, b.drv.gets)
	b.clk.Advance(b.cfg.Interval)
	servicetest.Recv(t, b.checks)
	servicetest.Recv(t, b.drv.gets)
}
