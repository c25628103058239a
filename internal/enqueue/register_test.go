package enqueue

import (
	"testing"
	"time"
)

// TestRegistration: what Handle and Declare refuse, in the order they
// check it, and the defaults they keep.
func TestRegistration(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		dup  bool
		opts []func(*Options)
		msg  string
	}{
		{"a b", true, nil, `keel: Handle: invalid task type "a b"`},
		{"keel.x", true, nil, `keel: Handle: task type "keel.x": names starting with "keel." are reserved for keel's own tasks`},
		{"t", true, opts(delay(time.Second)), `keel: Handle: task type "t" registered twice`},
		{"t", false, opts(idemKey("k")), `keel: Handle("t"): UniqueBy, IdempotencyKey, RunAt, Delay, Meta and Sequence apply to single tasks only`},
		{"t", false, opts(meta(map[string]string{"a": "b"})), `keel: Handle("t"): UniqueBy, IdempotencyKey, RunAt, Delay, Meta and Sequence apply to single tasks only`},
		{"t", false, opts(maxAttempts(0)), `keel: Handle("t"): keel: invalid input: max attempts must be at least 1, got 0`},
		{"t", false, opts(onDead("t")), `keel: Handle("t"): OnDead names the type itself`},
	} {
		_, err := Registration("Handle", tc.typ, tc.dup, tc.opts)
		if err == nil || err.Error() != tc.msg {
			t.Errorf("got %v, want %s", err, tc.msg)
		}
	}
	o, err := Registration("Declare", "t", false, opts(queue("q"), backoffOpt(time.Second, time.Minute), maxSnoozes(3)))
	if err != nil || *o.Queue != "q" || o.Backoff.Max != time.Minute || *o.MaxSnoozes != 3 {
		t.Fatalf("defaults %+v, %v", o, err)
	}
}
