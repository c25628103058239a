package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestSaveStep: an HTTP target posts a step with the fence of the running
// claim; GET shows it; a wrong fence, a task that is not running and bad
// bodies are refused and write nothing.
func TestSaveStep(t *testing.T) {
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		task := b.enqueue(t, `{"type":"email.send","payload":{"to":"a@example.com"}}`)
		other := b.enqueue(t, `{"type":"email.send","payload":{"to":"b@example.com"}}`) // stays pending
		now := time.Now()
		claimed, err := b.drv.Claim(t.Context(), driver.ClaimParams{Queue: "default", Limit: 1, Owner: "serve-node",
			Now: now, LeaseExpiresAt: now.Add(time.Minute)})
		if err != nil || len(claimed) != 1 || claimed[0].ID != task.ID {
			t.Fatalf("claim: %v, %v", claimed, err)
		}
		fence := claimed[0].Fence
		path := fmt.Sprintf("/v1/tasks/%d/steps", task.ID)
		var got Task
		b.call(t, "POST", path, fmt.Sprintf(`{"name":"render","fence":%d,"result":{"text":"hi there"}}`, fence)).ok(t, http.StatusOK, &got)
		if len(got.Steps) != 1 || got.Steps[0].Name != "render" || got.Steps[0].Attempt != 1 || !strings.Contains(string(got.Steps[0].Result), "hi there") {
			t.Fatalf("steps after the post: %+v", got.Steps)
		}
		b.call(t, "POST", path, fmt.Sprintf(`{"name":"send","fence":%d,"result":null}`, fence)).ok(t, http.StatusOK, nil)
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", task.ID), "").ok(t, http.StatusOK, &got)
		if len(got.Steps) != 2 || got.Steps[1].Name != "send" || string(got.Steps[1].Result) != "null" {
			t.Fatalf("GET's steps: %+v", got.Steps)
		}
		big := strings.Repeat("x", 600<<10)
		b.call(t, "POST", path, fmt.Sprintf(`{"name":"big1","fence":%d,"result":"%s"}`, fence, big)).ok(t, http.StatusOK, nil)
		post := func(name, body string, status int, detail string) badCall {
			return badCall{name: name, method: "POST", path: path, body: body, status: status, detail: detail}
		}
		refuse(t, b, []badCall{
			post("wrong fence", fmt.Sprintf(`{"name":"x","fence":%d,"result":1}`, fence+1), 409, "lease lost"),
			post("no fence", `{"name":"x","result":1}`, 400, `"fence" is required`),
			post("no name", fmt.Sprintf(`{"fence":%d,"result":1}`, fence), 400, `"name" is required`),
			post("no result", fmt.Sprintf(`{"name":"x","fence":%d}`, fence), 400, `"result" is required`),
			post("quote in name", fmt.Sprintf(`{"name":"a\"b","fence":%d,"result":1}`, fence), 400, "may not contain"),
			post("long name", fmt.Sprintf(`{"name":"%s","fence":%d,"result":1}`, strings.Repeat("n", 201), fence), 400, "more than 200"),
			post("unknown field", fmt.Sprintf(`{"name":"x","fence":%d,"result":1,"owner":"me"}`, fence), 400, "owner"),
			post("steps too large", fmt.Sprintf(`{"name":"big2","fence":%d,"result":"%s"}`, fence, big), 413, "1 MiB"),
			{name: "pending task", method: "POST", path: fmt.Sprintf("/v1/tasks/%d/steps", other.ID),
				body: `{"name":"x","fence":1,"result":1}`, status: 409, detail: "not running"},
			{name: "unknown task", method: "POST", path: "/v1/tasks/999999/steps",
				body: `{"name":"x","fence":1,"result":1}`, status: 404, detail: "not found"},
		})
		// The task finished: its claim is over, steps are refused.
		if _, err := b.drv.Finish(t.Context(), driver.FinishParams{Owner: "serve-node", Now: time.Now(), Transitions: []driver.Transition{
			{ID: task.ID, Fence: fence, State: driver.StateSucceeded, Task: &claimed[0]}}}); err != nil {
			t.Fatal(err)
		}
		refuse(t, b, []badCall{post("succeeded task", fmt.Sprintf(`{"name":"x","fence":%d,"result":1}`, fence), 409, "succeeded, not running")})
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", task.ID), "").ok(t, http.StatusOK, &got)
		if len(got.Steps) != 3 || got.State != "succeeded" {
			t.Fatalf("finished task: %s with %d steps", got.State, len(got.Steps))
		}
	})
}
