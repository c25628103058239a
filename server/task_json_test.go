package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// TestMarshalTaskMatchesEncodingJSON holds marshalTask to json.Marshal:
// the same bytes, or an error from both, for generated tasks whose fields
// take the values that need escaping, compacting or a fallback.
func TestMarshalTaskMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	strs := []string{"", "report", "a.b-c_d", "a<b", "x>y", "fish&chips", `q"uote`, `back\slash`, "tab\t",
		"line\n", "é", "日本", "\u2028", "\xff", "\x7f", " spaced out ", "/v1/tasks?x=1"}
	raws := []json.RawMessage{nil, {}, json.RawMessage(`{}`), json.RawMessage(`{"n":1}`), json.RawMessage(`{ "n": 1 }`),
		json.RawMessage("{\"n\":\n1}"), json.RawMessage(`{"h":"<b>&amp;</b>"}`), json.RawMessage(`{"u":"é"}`),
		json.RawMessage(`{"s":"\u2028"}`), json.RawMessage("{\"s\":\"\u2029\"}"), json.RawMessage(`[1,2.5,-3e2,true,null]`),
		json.RawMessage(`"text"`), json.RawMessage(`null`), json.RawMessage(`{"a":{"b":[{}]}}`)}
	zones := []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+1800), time.FixedZone("odd", -(3*3600 + 17)),
		time.FixedZone("far", 24*3600+60)}
	rng := rand.New(rand.NewPCG(17, 2026))
	pick := func(n int) int { return rng.IntN(n) }
	// Most values are plain, so that many tasks take the fast path whole.
	str := func() string {
		if pick(10) < 9 {
			return strs[pick(3)]
		}
		return strs[pick(len(strs))]
	}
	raw := func() json.RawMessage {
		if pick(10) < 9 {
			return raws[2+pick(2)] // `{}` or `{"n":1}`
		}
		return raws[pick(len(raws))]
	}
	when := func() time.Time {
		switch pick(60) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		case 2:
			return time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC)
		default:
			zone := time.UTC
			if pick(10) == 0 {
				zone = zones[pick(len(zones))]
			}
			base := time.Date(2026, 12, 2, 3, 4, 5, 0, zone)
			return base.Add(time.Duration(rng.Int64N(int64(400 * 24 * time.Hour))))
		}
	}
	optWhen := func() *time.Time {
		if pick(3) == 0 {
			return nil
		}
		w := when()
		return &w
	}
	durations := []time.Duration{0, time.Minute, 90 * time.Second, 1500 * time.Millisecond, 250 * time.Microsecond, -time.Second, 3 * time.Hour}
	fast := 0
	for i := range 20000 {
		task := Task{
			ID: rng.Int64N(1 << 40), Type: str(), Queue: str(), Priority: pick(200) - 100,
			State: str(), Attempt: pick(30), MaxAttempts: pick(30), Snoozes: pick(5),
			Payload: raw(), Result: raw(), Timeout: Duration(durations[pick(len(durations))]),
			RunAt: when(), CreatedAt: when(), StartedAt: optWhen(), AttemptedAt: optWhen(), FinishedAt: optWhen(),
			UpdatedAt: when(), Node: str(), Meta: raw(), IdempotencyKey: str(), UniqueDigest: str(), ETA: optWhen(),
			ETAFinish: optWhen(), ETAStatus: str(), BrakeState: str(), NextProbeAt: optWhen(), Duplicate: pick(2) == 0, Archived: pick(4) == 0,
			ArchivedAt: optWhen(),
		}
		switch pick(3) {
		case 0:
			task.Errors = []AttemptError{}
		case 1:
			task.Errors = []AttemptError{{Attempt: 1, Node: str(), Start: when(), End: when(),
				Outcome: "error", Error: str()}}
		}
		if pick(2) == 0 {
			task.BatchID = rng.Int64N(1 << 40)
		}
		if pick(4) == 0 {
			task.Steps = []Step{{Name: str(), Result: raw(), At: when(), Attempt: 1}}
		}
		if _, ok := appendTask(nil, &task); ok {
			fast++
		}
		want, wantErr := json.Marshal(&task)
		got, gotErr := marshalTask(&task)
		if (wantErr != nil) != (gotErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("task %d: %+v\nencoding/json: %s (err %v)\nmarshalTask:   %s (err %v)", i, task, want, wantErr, got, gotErr)
		}
	}
	// Both paths must have been taken for the comparison to mean anything.
	if fast < 100 || fast > 19900 {
		t.Errorf("%d of 20000 tasks took the fast path; the generator no longer exercises both paths", fast)
	}
	t.Logf("%d of 20000 tasks took the fast path", fast)
}

// TestMarshalTaskPlain checks that an ordinary enqueue answer takes the
// fast path, without encoding/json.
func TestMarshalTaskPlain(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 3, 4, 5, 123456000, time.UTC)
	task := Task{ID: 42, Type: "email.send", Queue: "default", State: "pending", MaxAttempts: 25,
		Payload: json.RawMessage(`{"to":"a@example.com"}`), Errors: []AttemptError{}, Timeout: Duration(time.Minute),
		RunAt: at, CreatedAt: at, UpdatedAt: at, ETA: &at, ETAFinish: &at, ETAStatus: "estimated"}
	b, ok := appendTask(nil, &task)
	if !ok {
		t.Fatal("an ordinary task fell back to encoding/json")
	}
	want, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func BenchmarkMarshalTask(b *testing.B) {
	at := time.Date(2026, 12, 2, 3, 4, 5, 123456000, time.UTC)
	task := Task{ID: 42, Type: "email.send", Queue: "default", State: "pending", MaxAttempts: 25,
		Payload: json.RawMessage(`{"to":"a@example.com","n":17}`), Errors: []AttemptError{}, Timeout: Duration(time.Minute),
		RunAt: at, CreatedAt: at, UpdatedAt: at, ETA: &at, ETAFinish: &at, ETAStatus: "estimated"}
	b.Run("marshalTask", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalTask(&task); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&task); err != nil {
				b.Fatal(err)
			}
		}
	})
}
