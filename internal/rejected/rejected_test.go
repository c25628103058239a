package rejected_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/rejected"
)

var (
	_  rejected.Store = driver.SourceStore(nil) // the real drivers fit
	t0                = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// store is a fake driver's source store: messages by id; err fails every
// call.
type store struct {
	msgs     map[int64]*driver.RejectedRow
	sources  []driver.SourceRow
	filter   driver.RejectedFilter
	resolved map[int64]int64
	err      error
}

func (s *store) ListRejected(_ context.Context, f driver.RejectedFilter) ([]driver.RejectedRow, error) {
	s.filter = f
	if s.err != nil {
		return nil, s.err
	}
	var out []driver.RejectedRow
	for _, m := range s.msgs {
		out = append(out, *m)
	}
	return out, nil
}

func (s *store) GetRejected(_ context.Context, id int64) (*driver.RejectedRow, error) {
	if s.err != nil {
		return nil, s.err
	}
	if m := s.msgs[id]; m != nil {
		return m, nil
	}
	return nil, driver.ErrNotFound
}

func (s *store) ResolveRejected(_ context.Context, id, taskID int64, now time.Time) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	if !now.Equal(t0) {
		return false, errors.New("not stamped with the clock")
	}
	s.resolved[id] = taskID
	return true, nil
}

func (s *store) DeleteRejected(_ context.Context, id int64) error {
	if s.err != nil {
		return s.err
	}
	if s.msgs[id] == nil {
		return driver.ErrNotFound
	}
	delete(s.msgs, id)
	return nil
}

func (s *store) ListSources(context.Context) ([]driver.SourceRow, error) { return s.sources, s.err }

func newBook() (*rejected.Book, *store) {
	s := &store{resolved: map[int64]int64{}, msgs: map[int64]*driver.RejectedRow{
		1: {ID: 1, Type: "t.order", Queue: "orders", Key: "/id", Body: []byte(`{"id":"A-1"}`), Size: 12},
		2: {ID: 2, Type: "t.order", Key: "header:Order-Id", Body: []byte(`{}`), Size: 2, Headers: []byte(`{"order-id":["B-2"]}`)},
		3: {ID: 3, Type: "t.order", Key: "/id", Body: []byte(`{"id"`), Size: 9000},
		4: {ID: 4, Type: "t.order", Key: "/id", Body: []byte(`not json`), Size: 8},
		5: {ID: 5, Type: "t.order", Key: "/id", Body: []byte(`{"id":"E"}`), Size: 10, TaskID: 42},
	}}
	return rejected.New(s, func() time.Time { return t0 }), s
}

func TestListFilter(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    driver.RejectedFilter
		want string // "" when accepted
	}{
		{"default limit", driver.RejectedFilter{}, ""},
		{"limit 1000", driver.RejectedFilter{Limit: 1000}, ""},
		{"limit 1001", driver.RejectedFilter{Limit: 1001}, "limit 1001 out of 1..1000"},
		{"negative limit", driver.RejectedFilter{Limit: -1}, "limit -1 out of 1..1000"},
		{"negative before", driver.RejectedFilter{Before: -5}, "before -5 is negative"},
	} {
		b, s := newBook()
		_, err := b.List(t.Context(), tc.f)
		if tc.want == "" {
			if err != nil || s.filter.Limit == 0 {
				t.Errorf("%s: %v, limit sent %d", tc.name, err, s.filter.Limit)
			}
			continue
		}
		if !errors.Is(err, kerr.ErrInvalid) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid %q", tc.name, err, tc.want)
		}
	}
	b, s := newBook()
	if _, err := b.List(t.Context(), driver.RejectedFilter{}); err != nil || s.filter.Limit != 100 {
		t.Fatalf("default limit sent %d (%v), want 100", s.filter.Limit, err)
	}
}

func TestNoSourceStore(t *testing.T) {
	b := rejected.New(struct{}{}, time.Now)
	if rows, err := b.Sources(t.Context()); rows != nil || err != nil {
		t.Fatalf("Sources: %v, %v; want none", rows, err)
	}
	_, errList := b.List(t.Context(), driver.RejectedFilter{})
	_, errGet := b.Get(t.Context(), 1)
	for _, err := range []error{errList, errGet, b.Delete(t.Context(), 1), b.Resolved(t.Context(), 1, 2)} {
		if !errors.Is(err, driver.ErrWrongState) || !strings.Contains(err.Error(), "the driver stores no broker sources") {
			t.Errorf("%v, want ErrWrongState", err)
		}
	}
	// A bad filter is found before the missing store.
	if _, err := b.List(t.Context(), driver.RejectedFilter{Limit: -1}); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("bad filter: %v", err)
	}
}

func TestSourcesAreNeverNilFromAStore(t *testing.T) {
	b, _ := newBook()
	if rows, err := b.Sources(t.Context()); rows == nil || len(rows) != 0 || err != nil {
		t.Fatalf("Sources: %#v, %v; want an empty list", rows, err)
	}
}

func TestNotFoundAndUnavailable(t *testing.T) {
	b, s := newBook()
	if _, err := b.Get(t.Context(), 99); !errors.Is(err, driver.ErrNotFound) || err.Error() != driver.ErrNotFound.Error()+": no rejected message 99" {
		t.Errorf("Get: %v", err)
	}
	if err := b.Delete(t.Context(), 99); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Delete: %v", err)
	}
	s.err = syscall.ECONNREFUSED
	_, errSources := b.Sources(t.Context())
	_, errList := b.List(t.Context(), driver.RejectedFilter{})
	_, errGet := b.Get(t.Context(), 1)
	for _, err := range []error{errSources, errList, errGet, b.Delete(t.Context(), 1), b.Resolved(t.Context(), 1, 2)} {
		if !errors.Is(err, driver.ErrUnavailable) || !strings.HasPrefix(err.Error(), "keel: ") {
			t.Errorf("%v, want ErrUnavailable", err)
		}
	}
}

func TestResubmission(t *testing.T) {
	for _, tc := range []struct {
		name    string
		id      int64
		payload string
		key     string
		want    rejected.Task
		err     string // "" when accepted
	}{
		{"key from the body", 1, "", "", rejected.Task{Type: "t.order", Queue: "orders", Key: "A-1", Payload: json.RawMessage(`{"id":"A-1"}`)}, ""},
		{"key from a header", 2, "", "", rejected.Task{Type: "t.order", Key: "B-2", Payload: json.RawMessage(`{}`)}, ""},
		{"key given", 4, `{"x":1}`, "K", rejected.Task{Type: "t.order", Key: "K", Payload: json.RawMessage(`{"x":1}`)}, ""},
		{"payload given", 1, `{"id":"Z"}`, "", rejected.Task{Type: "t.order", Queue: "orders", Key: "Z", Payload: json.RawMessage(`{"id":"Z"}`)}, ""},
		{"done before", 5, "", "", rejected.Task{Done: 42}, ""},
		{"cut body", 3, "", "", rejected.Task{}, "rejected message 3: only 5 of its 9000 bytes were stored; resubmit it with a payload"},
		{"still not JSON", 4, "", "", rejected.Task{}, "rejected message 4: body is not JSON"},
		{"key given, not JSON", 4, "", "K", rejected.Task{}, "rejected message 4: the payload is not JSON"},
		{"no key in the payload", 1, `{"other":1}`, "", rejected.Task{}, "rejected message 1: no key: nothing at /id in the body"},
	} {
		b, _ := newBook()
		var payload json.RawMessage
		if tc.payload != "" {
			payload = json.RawMessage(tc.payload)
		}
		got, err := b.Resubmission(t.Context(), tc.id, payload, tc.key)
		if tc.err != "" {
			if !errors.Is(err, kerr.ErrInvalid) || !strings.HasSuffix(err.Error(), tc.err) {
				t.Errorf("%s: %v, want ErrInvalid %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got.Type != tc.want.Type || got.Queue != tc.want.Queue || got.Key != tc.want.Key ||
			string(got.Payload) != string(tc.want.Payload) || got.Done != tc.want.Done {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestResolved(t *testing.T) {
	b, s := newBook()
	if err := b.Resolved(t.Context(), 1, 77); err != nil || s.resolved[1] != 77 {
		t.Fatalf("Resolved: %v, recorded %v", err, s.resolved)
	}
	s.err = errors.New("disk full")
	err := b.Resolved(t.Context(), 1, 77)
	if err == nil || err.Error() != "keel: resubmit rejected message 1: task 77 enqueued, not recorded: disk full" {
		t.Fatalf("Resolved: %v", err)
	}
}

func TestHeaders(t *testing.T) {
	if h := rejected.Headers(&driver.RejectedRow{}); h != nil {
		t.Errorf("no headers: %v", h)
	}
	h := rejected.Headers(&driver.RejectedRow{Headers: []byte(`{"a":["1","2"]}`)})
	if len(h["a"]) != 2 || h["a"][1] != "2" {
		t.Errorf("headers: %v", h)
	}
}
