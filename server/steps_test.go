package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/keeltest"
	"github.com/keelq/keel/server/httptarget"
)

// TestSaveStep: an HTTP target posts a step with the fence of the running
// claim; GET shows it; a wrong fence, a task that is not running and bad
// bodies are refused and write nothing.
func TestSaveStep(t *testing.T) {
	t.Parallel()
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

// TestHTTPTargetSteps: an HTTP target stores a step through the API with
// the Keel-Fence of its delivery, fails the delivery, and on the retry
// reads the stored step with GET /v1/tasks/{id} and does not redo it; a
// post with the first delivery's fence is refused once the task was sent
// again.
func TestHTTPTargetSteps(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		var api string // the API's URL, known once the server runs
		var mu sync.Mutex
		runs := map[string]int{}
		var staleStatus int
		call := func(method, path, body string) (int, []byte) {
			req, err := http.NewRequest(method, api+path, strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return 0, nil
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return 0, nil
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return res.StatusCode, b
		}
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, fence := r.Header.Get("Keel-Task-Id"), r.Header.Get("Keel-Fence")
			_, body := call("GET", "/v1/tasks/"+id, "")
			var task Task
			if err := json.Unmarshal(body, &task); err != nil {
				t.Errorf("GET task: %v: %s", err, body)
			}
			done := map[string]bool{}
			for _, s := range task.Steps {
				done[s.Name] = true
			}
			step := func(name string) {
				if done[name] {
					return
				}
				mu.Lock()
				runs[name]++
				mu.Unlock()
				if status, b := call("POST", "/v1/tasks/"+id+"/steps", `{"name":"`+name+`","fence":`+fence+`,"result":{"by":`+fence+`}}`); status != http.StatusOK {
					t.Errorf("post step %s: %d %s", name, status, b)
				}
			}
			step("a")
			if fence == "1" {
				w.WriteHeader(http.StatusServiceUnavailable) // retried
				return
			}
			// The first delivery's claim is over: its fence no longer writes.
			status, _ := call("POST", "/v1/tasks/"+id+"/steps", `{"name":"late","fence":1,"result":1}`)
			mu.Lock()
			staleStatus = status
			mu.Unlock()
			step("b")
		}))
		t.Cleanup(target.Close)
		b := setup(t, db, Options{}, func(cfg *keel.Config) {
			h := keel.NewHandlers()
			if err := httptarget.Register(h, "hook.steps", httptarget.Target{URL: target.URL}); err != nil {
				t.Fatal(err)
			}
			cfg.Handlers = h
			cfg.PollInterval, cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffJitter = 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond, -1
		})
		api = b.url
		if err := b.client.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b.client.Stop(ctx) //nolint:errcheck // the test has its answer
		})
		task := b.enqueue(t, `{"type":"hook.steps","payload":{}}`)
		done := keeltest.WaitFinished(t, b.client, task.ID, 0)
		if done.State != keel.StateSucceeded || done.Attempt != 2 {
			t.Fatalf("task %s after %d attempts, want succeeded after 2", done.State, done.Attempt)
		}
		mu.Lock()
		defer mu.Unlock()
		if runs["a"] != 1 || runs["b"] != 1 || staleStatus != http.StatusConflict {
			t.Fatalf("step runs %v, stale post %d; want a and b once, 409", runs, staleStatus)
		}
		var got Task
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", task.ID), "").ok(t, http.StatusOK, &got)
		if len(got.Steps) != 2 || got.Steps[0].Name != "a" || got.Steps[1].Name != "b" ||
			string(got.Steps[0].Result) != `{"by":1}` || string(got.Steps[1].Result) != `{"by":2}` {
			t.Fatalf("steps %+v", got.Steps)
		}
	})
}

// TestSaveStepRefusesUnstorable: a step result passes the checks a
// payload passes, nesting included (at most 31 levels, which MariaDB
// stores), and a step name with a lone surrogate is refused rather than
// stored as U+FFFD: 400 on SQLite, PostgreSQL and MariaDB alike, and no
// step is stored.
func TestSaveStepRefusesUnstorable(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		task := b.enqueue(t, `{"type":"email.send"}`)
		now := time.Now()
		claimed, err := b.drv.Claim(t.Context(), driver.ClaimParams{Queue: "default", Limit: 1, Owner: "serve-node",
			Now: now, LeaseExpiresAt: now.Add(time.Minute)})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v, %v", claimed, err)
		}
		fence := claimed[0].Fence
		path := fmt.Sprintf("/v1/tasks/%d/steps", task.ID)
		post := func(name, stepName, result, detail string) badCall {
			return badCall{name: name, method: "POST", path: path, status: 400, detail: detail,
				body: fmt.Sprintf(`{"name":"%s","fence":%d,"result":%s}`, stepName, fence, result)}
		}
		refuse(t, b, []badCall{
			post("NUL", "s", `{"s":"a\u0000b"}`, `step "s": result contains the NUL character`),
			post("NUL in a key", "s", `{"\u0000":1}`, `step "s": result contains the NUL character`),
			post("lone surrogate", "s", `"\ud800"`, `step "s": result contains a lone UTF-16 surrogate \ud800`),
			post("lone low surrogate", "s", `["x\udc00"]`, `step "s": result contains a lone UTF-16 surrogate \udc00`),
			post("duplicate key", "s", `{"a":1,"a":2}`, `step "s": result: key "a" appears more than once`),
			post("nested duplicate key", "s", `[{"b":{"c":1,"c":1}}]`, `step "s": result: key "c" appears more than once`),
			post("nested 40 deep", "s", nested(40), `step "s": result is nested deeper than 29 levels`),
			post("nested 30 deep", "s", nested(30), `step "s": result is nested deeper than 29 levels`),
			post("nested 31 deep, brackets in keys", "s", `{"[":[{"]":`+nested(28)+`}]}`, `step "s": result is nested deeper than 29 levels`),
			post("huge number", "s", `1e400000`, `step "s": result: number "1e400000" is out of range`),
			post("lone surrogate in the name", `s\ud800`, `1`, `field "name" contains a lone UTF-16 surrogate \ud800`),
		})
		var got Task
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", task.ID), "").ok(t, http.StatusOK, &got)
		if len(got.Steps) != 0 {
			t.Fatalf("refused steps were stored: %+v", got.Steps)
		}
		// The deepest result allowed, and a paired surrogate, are stored
		// and read back on every database.
		b.call(t, "POST", path, fmt.Sprintf(`{"name":"deep","fence":%d,"result":{"\"[":%s}}`, fence, nested(28))).ok(t, http.StatusOK, nil)
		b.call(t, "POST", path, fmt.Sprintf(`{"name":"pair \ud83d\ude00","fence":%d,"result":"\ud83d\ude00"}`, fence)).ok(t, http.StatusOK, &got)
		var smile string
		if len(got.Steps) != 2 || got.Steps[1].Name != "pair 😀" || json.Unmarshal(got.Steps[1].Result, &smile) != nil || smile != "😀" {
			t.Fatalf("steps: %+v", got.Steps)
		}
	})
}
