package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

// slowBrakes is a SQLite driver whose ListBrakes, once armed, holds its
// answer until released: a read of the brakes that began before a write
// and returns after it.
type slowBrakes struct {
	*sqlite.Driver
	armed   chan struct{} // closed: the next ListBrakes holds its answer
	read    chan struct{} // closed when the held read has its answer
	release chan struct{} // closed: the held read returns
	once    sync.Once
}

func (d *slowBrakes) ListBrakes(ctx context.Context) ([]driver.BrakeRow, error) {
	rows, err := d.Driver.ListBrakes(ctx)
	select {
	case <-d.armed:
		d.once.Do(func() {
			close(d.read)
			<-d.release
		})
	default:
	}
	return rows, err
}

// A read of the brakes that began before this node opened a brake, and
// ended after the write committed, must not undo it: the snapshot would
// lose the open brake (and reset the judgement) until the next read, and
// the workers would claim the type against a failing downstream
// meanwhile.
func TestBrakeOpenedDuringARead(t *testing.T) {
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	if err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	slow := &slowBrakes{Driver: drv, armed: make(chan struct{}), read: make(chan struct{}), release: make(chan struct{})}
	e := &Engine{drv: slow, workCtx: ctx, cfg: Config{
		Driver: slow, Node: "n1", Now: time.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SettingsInterval: 50 * time.Millisecond,
		BrakeDefaults:    driver.BrakeConfig{Window: 2, Threshold: 0.5, Cooldown: time.Minute},
	}}
	const typ = "mail.send"
	if e.loadBrakes(ctx); e.brakeFilter([]string{typ}) == nil {
		t.Fatal("braked before any evidence")
	}
	close(slow.armed)
	loaded := make(chan struct{})
	go func() { e.loadBrakes(ctx); close(loaded) }()
	<-slow.read // the read has its answer: no brake

	fail := func(id int64) {
		row := &driver.TaskRow{ID: id, Type: typ, Attempt: 1}
		e.judgeAttempt(row, driver.Transition{ID: id, State: driver.StatePending, RunAt: time.Now().Add(time.Second),
			Error: &driver.AttemptError{Attempt: 1, Outcome: driver.OutcomeError, Error: "HTTP 503"}}, true)
	}
	fail(1)
	fail(2)
	if e.brakeFilter([]string{typ}) != nil {
		t.Fatal("the brake did not open after two failures of two")
	}
	close(slow.release)
	<-loaded
	if got := e.brakeFilter([]string{typ}); got != nil {
		t.Fatalf("a read begun before the brake opened undid it: the claims take %v", got)
	}
	rows, err := drv.ListBrakes(ctx)
	if err != nil || len(rows) != 1 || rows[0].State != driver.BrakeOpen {
		t.Fatalf("stored brakes %+v, %v", rows, err)
	}
	// The next read, begun after the write, agrees with it.
	if e.loadBrakes(ctx); e.brakeFilter([]string{typ}) != nil {
		t.Fatal("the brake is not in the snapshot after a fresh read")
	}
}
