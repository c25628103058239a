package enqueue

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// declarer is a fake of the type declarations: it records the calls and
// stores "remote" with a queue of its own.
type declarer struct {
	calls []string
	err   error
}

func (d *declarer) Declare(ctx context.Context) error {
	d.calls = append(d.calls, "declare")
	return d.err
}
func (d *declarer) DeclareLater(ctx context.Context) { d.calls = append(d.calls, "later") }
func (d *declarer) Stored(ctx context.Context, types []string) (map[string]*driver.TypeDefaults, error) {
	d.calls = append(d.calls, "stored")
	return map[string]*driver.TypeDefaults{"remote": {Name: "remote", Queue: "far"}}, nil
}

// inserts is a fake database: it inserts, or answers a held key's task
// as a duplicate, or fails with err.
type inserts struct {
	params []driver.InsertParams
	held   map[string]bool
	err    error
}

func (s *inserts) insert(params []driver.InsertParams) ([]driver.InsertResult, error) {
	if s.err != nil {
		return nil, s.err
	}
	var out []driver.InsertResult
	for _, p := range params {
		s.params = append(s.params, p)
		row := &driver.TaskRow{ID: int64(len(s.params)), Queue: p.Queue, Type: p.Type, State: driver.StatePending}
		out = append(out, driver.InsertResult{Task: row, Duplicate: p.IdemKey != "" && s.held[p.IdemKey]})
		if p.IdemKey != "" {
			s.held[p.IdemKey] = true
		}
	}
	return out, nil
}

type inserterBundle struct {
	in    *Inserter
	decl  *declarer
	db    *inserts
	wrote []int64
	spans *tracetest.SpanRecorder
}

func newInserter(t *testing.T) *inserterBundle {
	b := &inserterBundle{decl: &declarer{}, db: &inserts{held: map[string]bool{}}, spans: tracetest.NewSpanRecorder()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) }) //nolint:errcheck // in memory
	p := preparer()
	p.AnyType = true
	b.in = &Inserter{Prep: p, Decl: b.decl, Tracer: tp.Tracer("test"), Now: func() time.Time { return now },
		Wrap:  func(ctx context.Context, err error) error { return errors.Join(errors.New("wrapped"), err) },
		Wrote: func(row *driver.TaskRow) { b.wrote = append(b.wrote, row.ID) }}
	return b
}

func TestInserterEnqueue(t *testing.T) {
	ctx := context.Background()
	b := newInserter(t)
	specs := []Spec{{Type: "email"}, {Type: "remote", Options: opts(idemKey("k"))}}
	res, err := b.in.Enqueue(ctx, specs, false, b.db.insert)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || b.db.params[0].Queue != "mail" || b.db.params[1].Queue != "far" || !b.db.params[1].RunAt.Equal(now) {
		t.Fatalf("inserted %+v", b.db.params)
	}
	if want := []string{"declare", "stored"}; !reflect.DeepEqual(b.decl.calls, want) {
		t.Fatalf("declarations: %v, want %v", b.decl.calls, want)
	}
	if want := []int64{1, 2}; !reflect.DeepEqual(b.wrote, want) {
		t.Fatalf("wrote %v, want %v", b.wrote, want)
	}
	ended := b.spans.Ended()
	if len(ended) != 2 || ended[1].Name() != "keel.enqueue remote" || !strings.Contains(string(b.db.params[1].Meta), "traceparent") {
		t.Fatalf("spans %d, meta %s", len(ended), b.db.params[1].Meta)
	}

	// In a transaction: declared later; a duplicate wakes nobody.
	b.decl.calls = nil
	res, err = b.in.Enqueue(ctx, specs[1:], true, b.db.insert)
	if err != nil || !res[0].Duplicate {
		t.Fatalf("%+v, %v; want a duplicate", res, err)
	}
	if want := []string{"later", "stored"}; !reflect.DeepEqual(b.decl.calls, want) {
		t.Fatalf("declarations in a transaction: %v, want %v", b.decl.calls, want)
	}
	if len(b.wrote) != 2 {
		t.Fatalf("a duplicate woke the workers: %v", b.wrote)
	}
}

func TestInserterRefuses(t *testing.T) {
	ctx := context.Background()
	b := newInserter(t)
	if _, err := b.in.Enqueue(ctx, nil, false, b.db.insert); !errors.Is(err, kerr.ErrInvalid) ||
		err.Error() != "keel: invalid input: no tasks to enqueue" || len(b.decl.calls) != 0 {
		t.Fatalf("no tasks: %v (declarations %v)", err, b.decl.calls)
	}
	_, err := b.in.Enqueue(ctx, []Spec{{Type: "email"}, {Type: "bad type"}}, false, b.db.insert)
	if !errors.Is(err, kerr.ErrInvalid) || err.Error()[:8] != "task 1: " {
		t.Fatalf("a batch names the bad task: %v", err)
	}
	_, err = b.in.Enqueue(ctx, []Spec{{Type: "bad type"}}, false, b.db.insert)
	if !errors.Is(err, kerr.ErrInvalid) || err.Error()[:5] == "task " {
		t.Fatalf("a single task is not numbered: %v", err)
	}
	b.decl.err = errors.New("declare failed")
	if _, err := b.in.Enqueue(ctx, []Spec{{Type: "email"}}, false, b.db.insert); err != b.decl.err {
		t.Fatalf("declare error: %v", err)
	}
	if len(b.db.params) != 0 || len(b.spans.Ended()) != 0 {
		t.Fatalf("refused tasks were inserted (%d) or traced (%d)", len(b.db.params), len(b.spans.Ended()))
	}
}

// TestInserterInsertError: a failed insert is wrapped, says what failed,
// and marks every task's span.
func TestInserterInsertError(t *testing.T) {
	b := newInserter(t)
	b.db.err = errors.New("connection reset")
	_, err := b.in.Enqueue(context.Background(), []Spec{{Type: "email"}, {Type: "plain"}}, false, b.db.insert)
	if !errors.Is(err, b.db.err) || err.Error() != "enqueue: wrapped\nconnection reset" {
		t.Fatalf("%v", err)
	}
	ended := b.spans.Ended()
	if len(ended) != 2 || ended[0].Status().Code != codes.Error || len(b.wrote) != 0 {
		t.Fatalf("spans %d (%v), wrote %v", len(ended), ended[0].Status(), b.wrote)
	}
}

// TestInserterGate: only a single task with a key, outside a caller's
// transaction, goes through the gate.
func TestInserterGate(t *testing.T) {
	ctx := context.Background()
	b := newInserter(t)
	gated := 0
	b.in.Gate = func(ctx context.Context, p driver.InsertParams, insert InsertFunc) ([]driver.InsertResult, error) {
		gated++
		return insert([]driver.InsertParams{p})
	}
	keyed := Spec{Type: "email", Options: opts(idemKey("g"))}
	for _, c := range []struct {
		specs []Spec
		inTx  bool
		gated int
	}{
		{[]Spec{keyed}, false, 1},
		{[]Spec{keyed}, true, 1},
		{[]Spec{{Type: "email"}}, false, 1},
		{[]Spec{keyed, {Type: "plain"}}, false, 1},
		{[]Spec{{Type: "plain", Options: opts(idemKey("h"))}}, false, 2},
	} {
		if _, err := b.in.Enqueue(ctx, c.specs, c.inTx, b.db.insert); err != nil {
			t.Fatal(err)
		}
		if gated != c.gated {
			t.Fatalf("%d specs, in a transaction %v: gated %d times, want %d", len(c.specs), c.inTx, gated, c.gated)
		}
	}
}

func TestFuncs(t *testing.T) {
	type option func(*Options)
	fs := Funcs([]option{option(queue("q")), option(priority(3))})
	if o := Merge(Options{}, fs); *o.Queue != "q" || *o.Priority != 3 {
		t.Fatalf("%+v", o)
	}
}
