package server

import (
	"encoding/json"
	"strconv"
	"time"
)

// The encoding of a Task without reflection. Every enqueue answers with a
// Task, and encoding/json's reflective walk and its compaction of the raw
// payload were a tenth of keel serve's CPU under a load of one task per
// request. appendTask writes exactly the bytes json.Marshal writes (a
// differential test holds it to that); anything it does not write plainly
// (a string to escape, a payload with spaces or HTML characters, a year
// past 9999) sends the whole Task to json.Marshal instead.

// marshalTask encodes t as json.Marshal does.
func marshalTask(t *Task) ([]byte, error) {
	if b, ok := appendTask(make([]byte, 0, 512+len(t.Payload)+len(t.Result)+len(t.Meta)), t); ok {
		return b, nil
	}
	return json.Marshal(t)
}

// appendTask appends t's JSON to b, or reports false when some field
// needs encoding/json.
func appendTask(b []byte, t *Task) ([]byte, bool) {
	ok := true
	str := func(name, s string) {
		b = append(b, name...)
		b, ok = appendPlainString(b, s, ok)
	}
	raw := func(name string, m json.RawMessage) {
		b = append(b, name...)
		if m == nil {
			b = append(b, "null"...)
			return
		}
		ok = ok && plainJSON(m)
		b = append(b, m...)
	}
	at := func(name string, v time.Time) {
		b = append(b, name...)
		b, ok = appendTime(b, v, ok)
	}
	optAt := func(name string, v *time.Time) {
		if v != nil {
			at(name, *v)
		}
	}
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, t.ID, 10)
	str(`,"type":`, t.Type)
	str(`,"queue":`, t.Queue)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(t.Priority), 10)
	str(`,"state":`, t.State)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(t.Attempt), 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(t.MaxAttempts), 10)
	b = append(b, `,"snoozes":`...)
	b = strconv.AppendInt(b, int64(t.Snoozes), 10)
	raw(`,"payload":`, t.Payload)
	if len(t.Result) > 0 {
		raw(`,"result":`, t.Result)
	}
	b = append(b, `,"errors":`...)
	if len(t.Errors) == 0 && t.Errors != nil {
		b = append(b, "[]"...)
	} else if sub, err := json.Marshal(t.Errors); err == nil {
		b = append(b, sub...)
	} else {
		return nil, false
	}
	str(`,"timeout":`, time.Duration(t.Timeout).String())
	at(`,"run_at":`, t.RunAt)
	at(`,"created_at":`, t.CreatedAt)
	optAt(`,"started_at":`, t.StartedAt)
	optAt(`,"attempted_at":`, t.AttemptedAt)
	optAt(`,"finished_at":`, t.FinishedAt)
	at(`,"updated_at":`, t.UpdatedAt)
	if t.Node != "" {
		str(`,"node":`, t.Node)
	}
	if len(t.Meta) > 0 {
		raw(`,"meta":`, t.Meta)
	}
	if t.IdempotencyKey != "" {
		str(`,"idempotency_key":`, t.IdempotencyKey)
	}
	if t.UniqueDigest != "" {
		str(`,"unique_digest":`, t.UniqueDigest)
	}
	optAt(`,"eta":`, t.ETA)
	optAt(`,"eta_finish":`, t.ETAFinish)
	if t.ETAStatus != "" {
		str(`,"eta_status":`, t.ETAStatus)
	}
	if t.BrakeState != "" {
		str(`,"brake_state":`, t.BrakeState)
	}
	optAt(`,"next_probe_at":`, t.NextProbeAt)
	if t.Duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	if t.Archived {
		b = append(b, `,"archived":true`...)
	}
	optAt(`,"archived_at":`, t.ArchivedAt)
	if len(t.Steps) > 0 {
		sub, err := json.Marshal(t.Steps)
		if err != nil {
			return nil, false
		}
		b = append(b, `,"steps":`...)
		b = append(b, sub...)
	}
	if t.BatchID != 0 {
		b = append(b, `,"batch_id":`...)
		b = strconv.AppendInt(b, t.BatchID, 10)
	}
	if t.Sequence != "" {
		str(`,"sequence":`, t.Sequence)
	}
	if t.Held {
		b = append(b, `,"held":true`...)
	}
	return append(b, '}'), ok
}

// appendPlainString appends s quoted when no byte of it needs escaping
// (encoding/json escapes controls, quotes, backslashes, <, > and &, and
// rewrites invalid UTF-8 and U+2028/U+2029); otherwise it reports false.
func appendPlainString(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			ok = false
			break
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}

// plainJSON reports whether encoding/json would write the raw value m as
// it is: no whitespace to compact away, nothing it escapes for HTML and no
// byte outside ASCII (among which U+2028 and U+2029, which it escapes).
// m is a stored payload, result or meta, valid JSON already.
func plainJSON(m json.RawMessage) bool {
	for _, c := range m {
		if c <= ' ' || c > 0x7e || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return len(m) > 0
}

// appendTime appends v as time.Time's MarshalJSON does, for the years and
// whole-minute zone offsets it accepts; otherwise it reports false.
func appendTime(b []byte, v time.Time, ok bool) ([]byte, bool) {
	_, off := v.Zone()
	if y := v.Year(); y < 0 || y > 9999 || off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		ok = false
	}
	b = append(b, '"')
	b = v.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}
