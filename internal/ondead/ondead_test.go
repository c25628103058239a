package ondead_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/ondead"
	"github.com/keelq/keel/internal/outcome"
)

var (
	_  ondead.Store = driver.Driver(nil) // the real drivers fit
	t0              = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// store is a fake driver holding tasks by id; err, when set, fails Get.
type store struct {
	tasks map[int64]*driver.TaskRow
	err   error
	gets  int
}

func (s *store) Get(_ context.Context, id int64) (*driver.TaskRow, error) {
	s.gets++
	if s.err != nil {
		return nil, s.err
	}
	if r := s.tasks[id]; r != nil {
		return r, nil
	}
	return nil, driver.ErrNotFound
}

type bundle struct {
	drv   *store
	decl  map[string]*driver.TypeDefaults
	asked []string // types Declaration was asked about
	hooks []*driver.TaskRow
	cfg   ondead.Config
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{drv: &store{tasks: map[int64]*driver.TaskRow{}}, decl: map[string]*driver.TypeDefaults{}}
	b.cfg = ondead.Config{
		Driver: b.drv, Now: func() time.Time { return t0 },
		Declaration: func(_ context.Context, taskType string) (*driver.TypeDefaults, error) {
			b.asked = append(b.asked, taskType)
			return b.decl[taskType], nil
		},
		Reserved: func(taskType string) bool { return strings.HasPrefix(taskType, "keel.") },
		Queue:    "default", HookQueue: "keel", MaxAttempts: 4, Timeout: time.Minute,
		Hook: func(_ context.Context, row *driver.TaskRow) error { b.hooks = append(b.hooks, row); return nil },
	}
	return b
}

// dead is a task of type x.send dying on attempt 3 (fence 7), as the
// worker sees it, and the transition that dead-letters it.
func dead() (*driver.TaskRow, driver.Transition) {
	row := &driver.TaskRow{ID: 42, Fence: 7, Type: "x.send", Queue: "mail", Attempt: 3,
		Payload: []byte(`{"to":"a@b"}`), Meta: []byte(`{"tenant":"t1"}`)}
	return row, driver.Transition{ID: 42, Fence: 7, State: driver.StateDead,
		Error: &driver.AttemptError{Attempt: 3, Error: "recipient gone"}}
}

func payloadOf(t *testing.T, p driver.InsertParams) ondead.Payload {
	t.Helper()
	var out ondead.Payload
	if err := json.Unmarshal(p.Payload, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNoDeclarationNoFollowUps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row, tr := dead()
	f := ondead.New(b.cfg)
	if fu, err := f.FollowUps(context.Background(), row, tr); err != nil || fu != nil {
		t.Fatalf("follow-ups %+v, %v; want none", fu, err)
	}
	b.decl["x.send"] = &driver.TypeDefaults{Name: "x.send", Queue: "mail"} // declared, but no on_dead
	if fu, err := f.FollowUps(context.Background(), row, tr); err != nil || fu != nil {
		t.Fatalf("follow-ups %+v, %v; want none", fu, err)
	}
}

// keel's own types get no follow-ups, whatever is declared.
func TestReservedTypeNoFollowUps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.decl["keel.notify.x"] = &driver.TypeDefaults{OnDead: "x.failed", OnDeadHook: true}
	row, tr := dead()
	row.Type = "keel.notify.x"
	if fu, err := ondead.New(b.cfg).FollowUps(context.Background(), row, tr); err != nil || fu != nil {
		t.Fatalf("follow-ups %+v, %v; want none", fu, err)
	}
	if len(b.asked) != 0 {
		t.Fatalf("declarations read: %v", b.asked)
	}
}

// A type with an on_dead type gets one follow-up of it, in the default
// queue with the default attempts and timeout when its type declares
// none, carrying the dead task, marked as a follow-up, keyed by the death.
func TestOnDeadFollowUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.decl["x.send"] = &driver.TypeDefaults{OnDead: "x.failed"}
	row, tr := dead()
	fu, err := ondead.New(b.cfg).FollowUps(context.Background(), row, tr)
	if err != nil || len(fu) != 1 {
		t.Fatalf("follow-ups %+v, %v; want one", fu, err)
	}
	p := fu[0]
	if p.Type != "x.failed" || p.Queue != "default" || p.MaxAttempts != 4 || p.Timeout != time.Minute ||
		p.Priority != 0 || !p.RunAt.Equal(t0) || !p.Now.Equal(t0) {
		t.Fatalf("follow-up %+v", p)
	}
	if p.IdemKey != digest.ExplicitKey("keel.on_dead:x.failed:42:7") {
		t.Fatalf("idempotency key %q", p.IdemKey)
	}
	if string(p.Meta) != `{"keel.on_dead_of":"42"}` {
		t.Fatalf("meta %s", p.Meta)
	}
	want := ondead.Payload{TaskID: 42, Type: "x.send", Queue: "mail", Attempt: 3, Error: "recipient gone",
		Payload: json.RawMessage(`{"to":"a@b"}`)}
	if got := payloadOf(t, p); got.TaskID != want.TaskID || got.Type != want.Type || got.Queue != want.Queue ||
		got.Attempt != want.Attempt || got.Error != want.Error || string(got.Payload) != string(want.Payload) {
		t.Fatalf("payload %+v, want %+v", got, want)
	}
	canon, err := digest.Canonical(p.Payload)
	if err != nil || string(canon) != string(p.Payload) {
		t.Fatalf("payload not canonical: %s", p.Payload)
	}
	if p.PayloadDigest != digest.Sum(append([]byte("x.failed\x00"), p.Payload...)) {
		t.Fatal("payload digest is not over the follow-up's type and payload")
	}
	if b.drv.gets != 0 {
		t.Fatal("read the task although the row had its payload")
	}
}

// The follow-up takes its own type's declared queue, priority, attempts
// and timeout.
func TestFollowUpTypeDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	prio := 5
	b.decl["x.send"] = &driver.TypeDefaults{OnDead: "x.failed"}
	b.decl["x.failed"] = &driver.TypeDefaults{Queue: "fallback", Priority: &prio, MaxAttempts: 9, Timeout: time.Hour}
	row, tr := dead()
	fu, err := ondead.New(b.cfg).FollowUps(context.Background(), row, tr)
	if err != nil || len(fu) != 1 {
		t.Fatalf("follow-ups %+v, %v", fu, err)
	}
	if p := fu[0]; p.Queue != "fallback" || p.Priority != 5 || p.MaxAttempts != 9 || p.Timeout != time.Hour {
		t.Fatalf("follow-up %+v", p)
	}
}

// A type whose deaths run the hook gets a keel.on_dead task in keel's
// queue besides its on_dead follow-up.
func TestHookTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.decl["x.send"] = &driver.TypeDefaults{OnDead: "x.failed", OnDeadHook: true}
	row, tr := dead()
	fu, err := ondead.New(b.cfg).FollowUps(context.Background(), row, tr)
	if err != nil || len(fu) != 2 {
		t.Fatalf("follow-ups %+v, %v; want two", fu, err)
	}
	h := fu[1]
	if h.Type != ondead.Type || h.Queue != "keel" || h.MaxAttempts != 25 || h.Timeout != time.Minute ||
		h.IdemKey != digest.ExplicitKey("keel.on_dead:hook:42:7") || string(h.Payload) != string(fu[0].Payload) ||
		h.PayloadDigest != digest.Sum(append([]byte(ondead.Type+"\x00"), h.Payload...)) {
		t.Fatalf("hook task %+v", h)
	}
}

// The rescuer's row has no payload: the task is read for it (and its
// meta); a failed read delays the death.
func TestRescuedRowIsRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.decl["x.send"] = &driver.TypeDefaults{OnDead: "x.failed"}
	row, tr := dead()
	b.drv.tasks[42] = &driver.TaskRow{ID: 42, Payload: row.Payload, Meta: row.Meta}
	row.Payload, row.Meta = nil, nil
	f := ondead.New(b.cfg)
	fu, err := f.FollowUps(context.Background(), row, tr)
	if err != nil || len(fu) != 1 || string(payloadOf(t, fu[0]).Payload) != `{"to":"a@b"}` || b.drv.gets != 1 {
		t.Fatalf("follow-ups %+v, %v after %d reads", fu, err, b.drv.gets)
	}
	b.drv.err = errors.New("connection refused")
	if _, err := f.FollowUps(context.Background(), row, tr); err == nil || !errors.Is(err, b.drv.err) {
		t.Fatalf("err %v, want the read's", err)
	}
}

// A follow-up's death enqueues no follow-up of its own: only the hook's
// task when its type runs the hook.
func TestNoChains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.decl["x.send"] = &driver.TypeDefaults{OnDead: "x.failed"}
	row, tr := dead()
	row.Meta = []byte(`{"keel.on_dead_of":"41"}`)
	f := ondead.New(b.cfg)
	if fu, err := f.FollowUps(context.Background(), row, tr); err != nil || fu != nil {
		t.Fatalf("follow-ups %+v, %v; want none", fu, err)
	}
	b.decl["x.send"].OnDeadHook = true
	fu, err := f.FollowUps(context.Background(), row, tr)
	if err != nil || len(fu) != 1 || fu[0].Type != ondead.Type {
		t.Fatalf("follow-ups %+v, %v; want the hook's task only", fu, err)
	}
}

// A declaration that cannot be read delays the death.
func TestDeclarationError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("connection refused")
	b.cfg.Declaration = func(_ context.Context, taskType string) (*driver.TypeDefaults, error) {
		if taskType == "x.failed" {
			return nil, boom
		}
		return &driver.TypeDefaults{OnDead: "x.failed"}, nil
	}
	row, tr := dead()
	if _, err := ondead.New(b.cfg).FollowUps(context.Background(), row, tr); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the declaration's", err)
	}
}

func hookTask(t *testing.T, p ondead.Payload) *driver.TaskRow {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return &driver.TaskRow{ID: 100, Type: ondead.Type, Queue: "keel", Payload: raw}
}

// The hook runs with the dead task as stored now.
func TestHandleRunsHookWithStoredTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stored := &driver.TaskRow{ID: 42, Type: "x.send", State: driver.StateDead, Attempt: 3}
	b.drv.tasks[42] = stored
	if _, err := ondead.New(b.cfg).Handle(context.Background(), hookTask(t, ondead.Payload{TaskID: 42})); err != nil {
		t.Fatal(err)
	}
	if len(b.hooks) != 1 || b.hooks[0] != stored {
		t.Fatalf("hook ran with %+v, want the stored task", b.hooks)
	}
}

// A dead task gone from the database (purged) reaches the hook as the
// payload describes it.
func TestHandlePurgedTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := ondead.Payload{TaskID: 42, Type: "x.send", Queue: "mail", Attempt: 3, Error: "recipient gone",
		Payload: json.RawMessage(`{"to":"a@b"}`)}
	if _, err := ondead.New(b.cfg).Handle(context.Background(), hookTask(t, p)); err != nil {
		t.Fatal(err)
	}
	if len(b.hooks) != 1 {
		t.Fatalf("hook ran %d times", len(b.hooks))
	}
	got := b.hooks[0]
	if got.ID != 42 || got.Type != "x.send" || got.Queue != "mail" || got.State != driver.StateDead ||
		got.Attempt != 3 || string(got.Payload) != `{"to":"a@b"}` || len(got.Errors) != 1 ||
		got.Errors[0] != (driver.AttemptError{Attempt: 3, Error: "recipient gone"}) {
		t.Fatalf("hook ran with %+v", got)
	}
}

// An undecodable payload fails for good; a failed read or hook is
// returned to be retried, the read's before the hook runs.
func TestHandleErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := ondead.New(b.cfg)
	_, err := f.Handle(context.Background(), &driver.TaskRow{ID: 100, Type: ondead.Type, Payload: []byte(`[1]`)})
	if !outcome.AsPermanent(err) {
		t.Fatalf("bad payload: err %v, want permanent", err)
	}
	b.drv.err = errors.New("disk full")
	if _, err := f.Handle(context.Background(), hookTask(t, ondead.Payload{TaskID: 42})); !errors.Is(err, b.drv.err) ||
		outcome.AsPermanent(err) {
		t.Fatalf("read failure: err %v", err)
	}
	if len(b.hooks) != 0 {
		t.Fatal("hook ran although the task could not be read")
	}
	b.drv.err = nil
	hookErr := errors.New("hook fails")
	b.cfg.Hook = func(context.Context, *driver.TaskRow) error { return hookErr }
	if _, err := ondead.New(b.cfg).Handle(context.Background(), hookTask(t, ondead.Payload{TaskID: 42})); !errors.Is(err, hookErr) {
		t.Fatalf("hook failure: err %v", err)
	}
}
