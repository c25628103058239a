package logevent

import "testing"

func TestTraceIDFromMeta(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		meta, want string
	}{
		{`{"traceparent":"00-` + id + `-00f067aa0ba902b7-01"}`, id},
		{`{"tenant":"a","traceparent":"01-` + id + `-00f067aa0ba902b7-00-extra"}`, id}, // a later version may add fields
		{`{"traceparent":"00-` + id + `-00f067aa0ba902b7-01-extra"}`, ""},              // version 00 has exactly four
		{`{"traceparent":"ff-` + id + `-00f067aa0ba902b7-01"}`, ""},
		{`{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`, ""},
		{`{"traceparent":"00-` + id + `-0000000000000000-01"}`, ""},
		{`{"traceparent":"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}`, ""}, // upper case
		{`{"traceparent":"00-` + id[:31] + `-00f067aa0ba902b7-01"}`, ""},
		{`{"traceparent":""}`, ""},
		{`{"tenant":"a"}`, ""},
		{`not json traceparent`, ""},
		{``, ""},
	} {
		if got := TraceIDFromMeta([]byte(tc.meta)); got != tc.want {
			t.Errorf("TraceIDFromMeta(%s) = %q, want %q", tc.meta, got, tc.want)
		}
	}
}
