package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestSequences: POST /v1/tasks with a sequence key enqueues the key's
// first task ready and the next held; bad keys and rules are refused with
// 400 and write nothing; a dead first member is listed by GET
// /v1/sequences/blocked with the members waiting behind it.
func TestSequences(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		first := b.enqueue(t, `{"type":"email.send","payload":{"n":1},"sequence":"customer-7"}`)
		second := b.enqueue(t, `{"type":"email.send","payload":{"n":2},"sequence":"customer-7","sequence_on_dead":"hold"}`)
		if first.Held || first.Sequence != "customer-7" || !second.Held || second.Sequence != "customer-7" ||
			!second.RunAt.Equal(driver.HeldUntil) {
			t.Fatalf("first %+v, second %+v: want the first ready, the second held until its turn", first, second)
		}
		var got Task
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", second.ID), "").ok(t, http.StatusOK, &got)
		if !got.Held || got.Sequence != "customer-7" || got.State != "pending" {
			t.Fatalf("GET the held task: %+v", got)
		}
		for body, msg := range map[string]string{
			`{"type":"email.send","sequence":""}`:                                 "must not be empty",
			`{"type":"email.send","sequence":"a\u0000b"}`:                         "without NUL",
			`{"type":"email.send","sequence":"` + strings.Repeat("k", 256) + `"}`: "1-255 bytes",
			`{"type":"email.send","sequence":"k","sequence_on_dead":"maybe"}`:     `must be "hold" or "skip"`,
			`{"type":"email.send","sequence_on_dead":"skip"}`:                     "applies only with Sequence",
		} {
			b.call(t, "POST", "/v1/tasks", body).problem(t, http.StatusBadRequest, msg)
		}
		var list TaskList
		b.call(t, "GET", "/v1/tasks", "").ok(t, http.StatusOK, &list)
		if len(list.Tasks) != 2 {
			t.Fatalf("%d tasks after the refused enqueues, want 2", len(list.Tasks))
		}

		var blocked BlockedSequenceList
		b.call(t, "GET", "/v1/sequences/blocked", "").ok(t, http.StatusOK, &blocked)
		if len(blocked.Sequences) != 0 {
			t.Fatalf("blocked before any death: %+v", blocked)
		}
		now := time.Now()
		claimed, err := b.drv.Claim(t.Context(), driver.ClaimParams{Queue: "default", Limit: 5, Owner: "serve-node",
			Now: now, LeaseExpiresAt: now.Add(time.Minute)})
		if err != nil || len(claimed) != 1 || claimed[0].ID != first.ID || claimed[0].Sequence != "customer-7" {
			t.Fatalf("claim: %+v, %v; want only the first member, with its key", claimed, err)
		}
		if _, err := b.drv.Finish(t.Context(), driver.FinishParams{Owner: "serve-node", Now: now, Transitions: []driver.Transition{{
			ID: first.ID, Fence: claimed[0].Fence, State: driver.StateDead, Task: &claimed[0],
			Error: &driver.AttemptError{Attempt: 1, Start: now, End: now, Outcome: driver.OutcomePermanent, Error: "bounced"}}}}); err != nil {
			t.Fatal(err)
		}
		b.call(t, "GET", "/v1/sequences/blocked?limit=10", "").ok(t, http.StatusOK, &blocked)
		if len(blocked.Sequences) != 1 || blocked.Sequences[0].Key != "customer-7" || blocked.Sequences[0].DeadTask != first.ID ||
			blocked.Sequences[0].Waiting != 1 || blocked.Sequences[0].DeadSince.IsZero() || blocked.NextAfter != "" {
			t.Fatalf("blocked %+v, want customer-7 held by task %d with 1 waiting", blocked, first.ID)
		}
		b.call(t, "GET", "/v1/sequences/blocked?limit=1", "").ok(t, http.StatusOK, &blocked)
		if blocked.NextAfter != "customer-7" {
			t.Fatalf("a full page: next_after %q", blocked.NextAfter)
		}
		b.call(t, "GET", "/v1/sequences/blocked?after=customer-7", "").ok(t, http.StatusOK, &blocked)
		if len(blocked.Sequences) != 0 {
			t.Fatalf("after the last key: %+v", blocked)
		}
		b.call(t, "GET", "/v1/sequences/blocked?limit=0", "").problem(t, http.StatusBadRequest, "limit")
		b.call(t, "GET", "/v1/sequences/blocked?key=x", "").problem(t, http.StatusBadRequest, "key")
	})
}
