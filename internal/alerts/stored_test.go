package alerts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/internal/kerr"
)

// TestRulesDocument: the rules set at runtime are stored with durations
// as strings and read back the same; a document that is not valid says
// so.
func TestRulesDocument(t *testing.T) {
	r := Rules{DeadPerHour: 7, OldestReadyAge: 90 * time.Second, FailureRatio: 0.25, FailureMinAttempts: 3,
		FailureWindow: 2 * time.Minute, NodeLost: true}
	raw := encodeRules(r)
	const want = `{"dead_per_hour":7,"oldest_ready_age":"1m30s","failure_ratio":0.25,"failure_min_attempts":3,` +
		`"failure_window":"2m0s","no_live_worker":false,"node_lost":true}`
	if string(raw) != want {
		t.Fatalf("stored %s\nwant %s", raw, want)
	}
	got, err := decodeRules(raw)
	if err != nil || got != r {
		t.Fatalf("read back %+v, %v; want %+v", got, err, r)
	}
	for doc, why := range map[string]string{
		`[1]`:                       "cannot unmarshal array",
		`{"oldest_ready_age":"zz"}`: `invalid duration "zz"`,
		`{"oldest_ready_age":"1m"}`: `invalid duration ""`,
		`{"oldest_ready_age":"1m","failure_window":"zz"}`: `invalid duration "zz"`,
	} {
		_, err := decodeRules([]byte(doc))
		if err == nil || !strings.HasPrefix(err.Error(), "keel: stored alert rules are not valid: ") || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want not valid: …%s", doc, err, why)
		}
	}
}

// meta is a fake keel_meta table; err fails every call.
type meta struct {
	docs map[string][]byte
	err  error
}

func (m *meta) GetMeta(ctx context.Context, name string) ([]byte, error) { return m.docs[name], m.err }
func (m *meta) PutMeta(ctx context.Context, name string, value []byte, now time.Time) error {
	if m.err != nil {
		return m.err
	}
	if value == nil {
		delete(m.docs, name)
	} else {
		m.docs[name] = value
	}
	return nil
}

// TestRuleStore: the configured rules apply until rules are set, which
// apply until reset; refused rules store nothing; failures say what
// failed, wrapped.
func TestRuleStore(t *testing.T) {
	ctx := context.Background()
	m := &meta{docs: map[string][]byte{}}
	configured := Rules{DeadPerHour: 3, OldestReadyAge: time.Minute, NoLiveWorker: true}
	s := RuleStore{Meta: m, Configured: configured, Now: time.Now,
		Wrap: func(ctx context.Context, err error) error { return errors.Join(errors.New("wrapped"), err) }}
	if r, runtime, err := s.Load(ctx); err != nil || runtime || r != configured {
		t.Fatalf("nothing set: %+v, %v, %v", r, runtime, err)
	}
	set := Rules{DeadPerHour: -1, FailureRatio: 0.5, FailureMinAttempts: 5, FailureWindow: time.Hour}
	if err := s.Set(ctx, set); err != nil {
		t.Fatal(err)
	}
	if r, runtime, err := s.Load(ctx); err != nil || !runtime || r != set {
		t.Fatalf("set: %+v, %v, %v", r, runtime, err)
	}
	if err := s.Set(ctx, Rules{DeadPerHour: -2}); !errors.Is(err, kerr.ErrInvalid) {
		t.Fatalf("invalid rules: %v", err)
	}
	if r, _, _ := s.Load(ctx); r != set {
		t.Fatalf("refused rules were stored: %+v", r)
	}
	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if r, runtime, err := s.Load(ctx); err != nil || runtime || r != configured {
		t.Fatalf("reset: %+v, %v, %v", r, runtime, err)
	}
	m.docs[RulesMeta] = []byte(`{"oldest_ready_age":"zz"}`)
	if r, runtime, err := s.Load(ctx); err == nil || runtime || r != (Rules{}) {
		t.Fatalf("a document not valid: %+v, %v, %v", r, runtime, err)
	}
	m.err = errors.New("down")
	for what, err := range map[string]error{
		"read":  func() error { _, _, err := s.Load(ctx); return err }(),
		"store": s.Set(ctx, set),
		"reset": s.Reset(ctx),
	} {
		if !errors.Is(err, m.err) || err.Error() != "keel: "+what+" alert rules: wrapped\ndown" {
			t.Errorf("%s: %v", what, err)
		}
	}
}
