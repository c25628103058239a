package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/keelq/keel"
)

// StepRequest is the body of POST /v1/tasks/{id}/steps: the result of one
// durable step of a running task, posted by the HTTP target that runs it
// with the fence keel sent it (the Keel-Fence header). All three fields
// are required; result is any JSON value (null for none).
type StepRequest struct {
	Name   string          `json:"name"`
	Fence  int64           `json:"fence"`
	Result json.RawMessage `json:"result"`
}

// Step is one finished durable step of a task, as the API returns it.
type Step struct {
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result"`
	// At is when the step was stored, by the task's attempt Attempt.
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
}

// saveStep handles POST /v1/tasks/{id}/steps: StepRequest → 200 Task with
// its steps; 409 when the task is not running with that fence (nothing is
// stored), 413 when the task's step results would pass 1 MiB.
func (s *server) saveStep(w http.ResponseWriter, r *http.Request) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	var req StepRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	switch {
	case req.Name == "":
		return badRequest("field \"name\" is required")
	case req.Fence <= 0:
		return badRequest("field \"fence\" is required: the positive fencing token keel sent in the Keel-Fence header")
	case len(req.Result) == 0:
		return badRequest("field \"result\" is required (JSON; null for none)")
	}
	info, err := s.c.SaveStep(r.Context(), id, req.Fence, req.Name, req.Result)
	switch {
	case errors.Is(err, keel.ErrLeaseLost):
		return &apiError{status: http.StatusConflict, detail: keelMessage(err)}
	case errors.Is(err, keel.ErrStepsTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, detail: keelMessage(err)}
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, taskFromInfo(info))
	return nil
}

// stepsFromInfo is the API's form of a task's steps.
func stepsFromInfo(steps []keel.StepInfo) []Step {
	if len(steps) == 0 {
		return nil
	}
	out := make([]Step, len(steps))
	for i, st := range steps {
		out[i] = Step{Name: st.Name, Result: st.Result, At: st.At.UTC(), Attempt: st.Attempt}
	}
	return out
}
