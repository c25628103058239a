package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeEnqueue feeds request bodies to the decoder of POST /v1/tasks.
// It must never panic; a body it rejects gets a 4xx; a body it accepts
// re-encodes to JSON that decodes to the same request.
func FuzzDecodeEnqueue(f *testing.F) {
	for _, seed := range []string{
		`{"type":"email.send"}`,
		`{"type":"email.send","payload":{"to":"ada@example.com","n":[1,2.5,{"x":null}]},"queue":"mail"}`,
		`{"type":"a","payload":null,"priority":-3,"max_attempts":4,"timeout":"1m30s","delay":"250ms"}`,
		`{"type":"a","run_at":"2026-01-02T15:04:05.123+02:00","unique_by":"k","meta":{"t":"1","u":""}}`,
		`{"type":"a","idempotency_key":"order-1","meta":{}}`,
		` {"type":"a"}` + "\n",
		`{"payload":"<a&b>\u00e9\ud83d\ude00"}`,
		`{"payload":1e400}`,
		`{"type":"a",}`,
		`{"type":"a"}{}`,
		`{"type":"a"} x`,
		`{"type":5}`,
		`{"Type":"a"}`,
		`{"type":"a","type":"b"}`,
		`{"delay":"soon"}`,
		`{"delay":5}`,
		`{"run_at":"yesterday"}`,
		`{"priority":1.5}`,
		`{"priority":99999999999999999999}`,
		`{"meta":{"a":1}}`,
		`{"meta":{"a":"1","a":"2"}}`,
		`{"payload":` + nested(64) + `}`,
		`{"payload":` + nested(63) + `}`,
		"{\"type\":\"a\",\"payload\":\"\u2028\"}",
		`[]`, `null`, `""`, ``, ` `, `{`, `}`, `{"a`, "\xff", `{"type":"\xff"}`,
		`{"type":"a","payload":"` + strings.Repeat("x", 5000) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeForFuzz(body, 4096)
		if err != nil {
			ae, ok := err.(*apiError)
			if !ok || ae.status < 400 || ae.status > 499 || ae.detail == "" {
				t.Fatalf("rejected with %#v, want a 4xx apiError", err)
			}
			return
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(req); err != nil {
			t.Fatalf("accepted %q but cannot re-encode %+v: %v", body, req, err)
		}
		// Re-encoding may lengthen the body (U+2028 is written escaped):
		// the limit is not what this checks.
		again, err := decodeForFuzz(buf.Bytes(), 1<<20)
		if err != nil {
			t.Fatalf("accepted %q, re-encoded as %s, then rejected: %v", body, buf.Bytes(), err)
		}
		if !sameRequest(req, again) {
			t.Fatalf("accepted %q as %+v; re-encoded as %s it decodes to %+v", body, req, buf.Bytes(), again)
		}
		job(req) // converting to keel's arguments must not panic either
	})
}

// decodeForFuzz decodes body as the handler of POST /v1/tasks does, with
// a body limit.
func decodeForFuzz(body []byte, limit int64) (EnqueueRequest, error) {
	r := httptest.NewRequest("POST", "/v1/tasks", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	var req EnqueueRequest
	err := decodeJSON(httptest.NewRecorder(), r, limit, &req)
	return req, err
}

// sameRequest compares two requests as values: times by instant, an empty
// meta like an absent one (it is omitted when encoded).
func sameRequest(a, b EnqueueRequest) bool {
	if (a.RunAt == nil) != (b.RunAt == nil) || a.RunAt != nil && !a.RunAt.Equal(*b.RunAt) {
		return false
	}
	a.RunAt, b.RunAt = nil, nil
	if len(a.Meta) == 0 && len(b.Meta) == 0 {
		a.Meta, b.Meta = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

func TestDecodeRejectsBadTimes(t *testing.T) {
	t.Parallel()
	// A time encoding/json cannot write back is not accepted either.
	for _, body := range []string{
		`{"run_at":"2026-01-02T15:04:05+24:00"}`,
		`{"run_at":"0000-01-01T00:00:00+01:00"}`,
	} {
		req, err := decodeForFuzz([]byte(body), 4096)
		if err != nil {
			continue
		}
		if _, err := json.Marshal(req); err != nil {
			t.Errorf("%s accepted but cannot be re-encoded: %v", body, err)
		}
	}
}
