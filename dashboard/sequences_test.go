package dashboard

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// TestSequencePages: /sequences lists a key held by its dead first member
// (the key escaped, the dead task linked, the waiting count) and says so
// when none is; a held member's task page shows its key and that it is
// held; a bad after is an error in words.
func TestSequencePages(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		ctx := t.Context()
		get := func(path string, want int) response {
			t.Helper()
			r := b.do(t, "GET", path, readToken, nil)
			if r.status != want {
				t.Fatalf("%s: status %d, want %d:\n%s", path, r.status, want, r.body)
			}
			checkPage(t, path, r)
			return r
		}
		if r := get("/sequences", http.StatusOK); !strings.Contains(r.body, `id="sequences-empty"`) ||
			!strings.Contains(r.body, `id="nav-sequences" href="/sequences" class="active"`) {
			t.Fatalf("/sequences with none blocked:\n%s", r.body)
		}
		key := "<script>alert(1)</script>"
		first, err := b.client.Enqueue(ctx, typeMail, map[string]int{"n": 1}, keel.Sequence(key))
		if err != nil {
			t.Fatal(err)
		}
		second, err := b.client.Enqueue(ctx, typeMail, map[string]int{"n": 2}, keel.Sequence(key))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		claimed, err := b.drv.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 5, Owner: "dash-test", Now: now,
			LeaseExpiresAt: now.Add(time.Minute)})
		if err != nil || len(claimed) != 1 || claimed[0].ID != first.ID {
			t.Fatalf("claim: %+v %v", claimed, err)
		}
		if _, err := b.drv.Finish(ctx, driver.FinishParams{Owner: "dash-test", Now: now, Transitions: []driver.Transition{{
			ID: first.ID, Fence: claimed[0].Fence, State: driver.StateDead, Task: &claimed[0],
			Error: &driver.AttemptError{Attempt: 1, Start: now, End: now, Outcome: driver.OutcomePermanent, Error: "bounced"}}}}); err != nil {
			t.Fatal(err)
		}
		r := get("/sequences", http.StatusOK)
		for _, want := range []string{html.EscapeString(key), fmt.Sprintf(`<a href="/tasks/%d">%d</a>`, first.ID, first.ID), `<td class="n">1</td>`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("/sequences: no %q in the page", want)
			}
		}
		if strings.Contains(r.body, key) {
			t.Errorf("/sequences: the key is not escaped")
		}
		p := fmt.Sprintf("/tasks/%d", second.ID)
		if r := get(p, http.StatusOK); !strings.Contains(r.body, `id="task-sequence">`+html.EscapeString(key)+` <span class="badge state-scheduled">held</span>`) {
			t.Errorf("%s: no held sequence key in the page", p)
		}
		get("/sequences?after=%ff", http.StatusBadRequest)
	})
}
