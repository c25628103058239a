package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
	"github.com/keelq/keel/internal/tracing"
)

// enqueue handles POST /v1/tasks: EnqueueRequest → 201 Task (new, with
// Location) or 200 Task with duplicate set (an idempotency key matched).
func (s *server) enqueue(w http.ResponseWriter, r *http.Request) error {
	var req EnqueueRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if key, ok, err := idempotencyHeader(r); err != nil {
		return err
	} else if ok {
		if req.IdempotencyKey != "" && req.IdempotencyKey != key {
			return badRequest("the Idempotency-Key header and the body's idempotency_key differ")
		}
		req.IdempotencyKey = key
	}
	j := job(req)
	info, err := s.c.Enqueue(callerTrace(r), j.Type, j.Payload, j.Options...)
	if err != nil {
		return enqueueError(err)
	}
	// The task is stored: from here on nothing may turn the answer into an
	// error, or the caller would submit it again.
	t := s.taskWithETA(r.Context(), info)
	if info.Duplicate {
		writeJSON(w, http.StatusOK, t)
		return nil
	}
	w.Header().Set("Location", "/v1/tasks/"+strconv.FormatInt(info.ID, 10))
	writeJSON(w, http.StatusCreated, t)
	return nil
}

// enqueueBatch handles POST /v1/tasks/batch: BatchRequest → 201
// BatchResponse, every task stored or none.
func (s *server) enqueueBatch(w http.ResponseWriter, r *http.Request) error {
	if _, ok := r.Header["Idempotency-Key"]; ok {
		return badRequest("the Idempotency-Key header applies to POST /v1/tasks; give each task of a batch its own idempotency_key")
	}
	var req BatchRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	jobs, err := s.batchJobs(req.Tasks, false)
	if err != nil {
		return err
	}
	infos, err := s.c.EnqueueMany(callerTrace(r), jobs)
	if err != nil {
		return enqueueError(err)
	}
	// The tasks are stored: from here on nothing may turn the answer into
	// an error, or the caller would submit them again.
	writeJSON(w, http.StatusCreated, BatchResponse{Tasks: s.tasksWithETA(r.Context(), infos)})
	return nil
}

// callerTrace returns the request's context joined to the caller's trace:
// the W3C traceparent and tracestate headers, when valid, become the parent
// of the enqueue spans, so the tasks' attempts join the caller's trace.
func callerTrace(r *http.Request) context.Context {
	return tracing.FromHeaders(r.Context(), propagation.HeaderCarrier(r.Header))
}

// enqueueError shapes a failed enqueue's error for the caller. A held
// idempotency key is a 409 in one sentence: keel's error also names the
// steps that failed and the task holding the key, which in a batch may be
// one of the batch's own tasks, never stored.
func enqueueError(err error) error {
	if errors.Is(err, keel.ErrIdempotencyConflict) {
		return &apiError{status: http.StatusConflict, detail: "idempotency key already used with a different payload or type"}
	}
	return err
}

// idempotencyHeader returns the request's Idempotency-Key header and
// whether it was sent. Sent empty, blank or more than once, it is an error:
// a key that is ignored or chosen between would break its promise.
func idempotencyHeader(r *http.Request) (string, bool, error) {
	vs, ok := r.Header["Idempotency-Key"]
	switch {
	case !ok:
		return "", false, nil
	case len(vs) > 1:
		return "", false, badRequest("the Idempotency-Key header is given %d times: send it once", len(vs))
	case strings.TrimSpace(vs[0]) == "":
		return "", false, badRequest("the Idempotency-Key header is empty: send a key of 1-255 bytes, or no header")
	}
	return vs[0], true, nil
}

// job turns a request into keel's enqueue arguments; keel validates them.
func job(req EnqueueRequest) keel.TaskSpec {
	j := keel.TaskSpec{Type: req.Type}
	if req.Payload != nil {
		j.Payload = req.Payload
	}
	if req.Queue != "" {
		j.Options = append(j.Options, keel.Queue(req.Queue))
	}
	if req.Priority != nil {
		j.Options = append(j.Options, keel.Priority(*req.Priority))
	}
	if req.RunAt != nil {
		j.Options = append(j.Options, keel.RunAt(*req.RunAt))
	}
	if req.Delay != nil {
		j.Options = append(j.Options, keel.Delay(time.Duration(*req.Delay)))
	}
	if req.MaxAttempts != nil {
		j.Options = append(j.Options, keel.MaxAttempts(*req.MaxAttempts))
	}
	if req.Timeout != nil {
		j.Options = append(j.Options, keel.Timeout(time.Duration(*req.Timeout)))
	}
	if req.UniqueBy != "" {
		j.Options = append(j.Options, keel.UniqueBy(req.UniqueBy))
	}
	if req.IdempotencyKey != "" {
		j.Options = append(j.Options, keel.IdempotencyKey(req.IdempotencyKey))
	}
	if req.Sequence != "" {
		j.Options = append(j.Options, keel.Sequence(req.Sequence))
	}
	if req.SequenceOnDead == "skip" { // any other value than hold is refused by checkSequenceOnDead
		j.Options = append(j.Options, keel.SequenceSkipDead())
	}
	if req.Meta != nil {
		j.Options = append(j.Options, keel.Meta(req.Meta))
	}
	if req.DependsOn != nil {
		j.Options = append(j.Options, keel.DependsOn(req.DependsOn...))
	}
	return j
}

// getTask handles GET /v1/tasks/{id}.
func (s *server) getTask(w http.ResponseWriter, r *http.Request) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	info, err := s.c.Get(r.Context(), id)
	if errors.Is(err, keel.ErrNotFound) {
		return &apiError{status: http.StatusNotFound, detail: fmt.Sprintf("task %d not found", id)}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.taskWithETA(r.Context(), info))
	return nil
}

// listTasks handles GET /v1/tasks: newest first, a page at a time.
func (s *server) listTasks(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "state", "type", "queue", "exclude_type", "exclude_queue", "created_after", "created_before", "finished_after", "finished_before",
		"cursor", "limit", "idempotency_key")
	if err != nil {
		return err
	}
	if key, ok := q["idempotency_key"]; ok {
		if len(q) > 1 {
			return badRequest("query parameter \"idempotency_key\" takes no other parameter")
		}
		list := TaskList{Tasks: []Task{}}
		info, err := s.c.GetByKey(r.Context(), key)
		switch {
		case errors.Is(err, keel.ErrNotFound):
		case err != nil:
			return err
		default:
			list.Tasks = append(list.Tasks, taskFromInfo(info))
		}
		writeJSON(w, http.StatusOK, list)
		return nil
	}
	p := keel.Filter{State: keel.State(q["state"]), Queue: q["queue"], ExcludeTypes: names(q["exclude_type"]), ExcludeQueues: names(q["exclude_queue"])}
	// One type is the exact filter it always was; a list or a prefix
	// ("keel.*") selects any of them.
	if ts := names(q["type"]); len(ts) > 1 || len(ts) == 1 && strings.HasSuffix(ts[0], "*") {
		p.Types = ts
	} else {
		p.Type = q["type"]
	}
	if p.CreatedAfter, err = queryTime(q, "created_after"); err != nil {
		return err
	}
	if p.CreatedBefore, err = queryTime(q, "created_before"); err != nil {
		return err
	}
	if err := queryFinished(q, &p); err != nil {
		return err
	}
	list, err := s.listPage(r.Context(), p, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// cancelTask handles POST /v1/tasks/{id}/cancel.
func (s *server) cancelTask(w http.ResponseWriter, r *http.Request) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	info, err := s.c.Cancel(r.Context(), id)
	if err != nil {
		return s.changeError(r.Context(), id, err, "only pending or running tasks can be cancelled")
	}
	writeJSON(w, http.StatusOK, taskFromInfo(info))
	return nil
}

// retryTask handles POST /v1/tasks/{id}/retry.
func (s *server) retryTask(w http.ResponseWriter, r *http.Request) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	info, err := s.c.Retry(r.Context(), id)
	if errors.Is(err, keel.ErrIdempotencyConflict) {
		return &apiError{status: http.StatusConflict, detail: fmt.Sprintf("task %d cannot be retried: a newer task holds its idempotency key", id)}
	}
	if err != nil {
		return s.changeError(r.Context(), id, err, "only dead or cancelled tasks can be retried")
	}
	writeJSON(w, http.StatusOK, s.taskWithETA(r.Context(), info))
	return nil
}

// changeError explains a failed cancel or retry of task id.
func (s *server) changeError(ctx context.Context, id int64, err error, rule string) error {
	switch {
	case errors.Is(err, keel.ErrNotFound):
		return &apiError{status: http.StatusNotFound, detail: fmt.Sprintf("task %d not found", id)}
	case errors.Is(err, keel.ErrWrongState):
		if info, gerr := s.c.Get(ctx, id); gerr == nil {
			return &apiError{status: http.StatusConflict, detail: fmt.Sprintf("task %d is %s: %s", id, info.State, rule)}
		}
		return &apiError{status: http.StatusConflict, detail: fmt.Sprintf("task %d: %s", id, rule)}
	}
	return err
}

// taskID parses the {id} path value.
func taskID(r *http.Request) (int64, error) { return pathID(r, "task") }

// pathID parses the {id} path value, the id of a what.
func pathID(r *http.Request, what string) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("invalid %s id %q: use a positive integer", what, shorten.String(v, 64))
	}
	return id, nil
}

// taskWithETA converts info and, for a pending task, adds its estimated
// start. An estimate that fails is left out (and logged): it never fails
// the request.
func (s *server) taskWithETA(ctx context.Context, info *keel.TaskInfo) Task {
	t := taskFromInfo(info)
	if info.State != keel.StatePending {
		return t
	}
	if ests := s.estimates(ctx, []*keel.TaskInfo{info}); ests != nil {
		withEstimate(&t, ests[0])
	}
	return t
}

// estimates estimates the pending tasks of infos at once (nil for the
// others); nil when that fails, which is logged: it never fails the
// request.
func (s *server) estimates(ctx context.Context, infos []*keel.TaskInfo) []*keel.Estimate {
	ests, err := s.c.EstimateMany(ctx, infos)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case len(infos) == 1:
			s.log.Warn("keel server: estimating a task's start failed", "task_id", infos[0].ID, "error", err)
		default:
			s.log.Warn("keel server: estimating the start of a batch's tasks failed", "tasks", len(infos), "error", err)
		}
		return nil
	}
	return ests
}

// withEstimate adds est, when there is one, to t.
func withEstimate(t *Task, est *keel.Estimate) {
	if est == nil {
		return
	}
	t.ETAStatus = string(est.Status)
	switch est.Status {
	case keel.ETAEstimated:
		start, finish := est.Start.UTC(), est.Finish.UTC()
		t.ETA, t.ETAFinish = &start, &finish
	case keel.ETABraked:
		t.BrakeState = string(est.Brake)
		if !est.NextProbe.IsZero() {
			at := est.NextProbe.UTC()
			t.NextProbeAt = &at
		}
	}
}

func taskFromInfo(info *keel.TaskInfo) Task {
	t := Task{
		ID: info.ID, Type: info.Type, Queue: info.Queue, Priority: info.Priority, State: string(info.State),
		Attempt: info.Attempt, MaxAttempts: info.MaxAttempts, Snoozes: info.Snoozes, Payload: info.Payload, Result: info.Result,
		Errors: make([]AttemptError, len(info.Errors)), Timeout: Duration(info.Timeout),
		RunAt: info.RunAt.UTC(), CreatedAt: info.CreatedAt.UTC(), UpdatedAt: info.UpdatedAt.UTC(),
		StartedAt: optTime(info.StartedAt), AttemptedAt: optTime(info.AttemptedAt), FinishedAt: optTime(info.FinishedAt),
		Node: info.Node, Meta: info.Meta, Duplicate: info.Duplicate,
		IdempotencyKey: info.IdempotencyKey, UniqueDigest: info.UniqueDigest,
		Archived: info.Archived, ArchivedAt: optTime(info.ArchivedAt), Steps: stepsFromInfo(info.Steps),
		BatchID: info.BatchID, Sequence: info.Sequence, Held: info.Held,
	}
	if len(t.Payload) == 0 {
		t.Payload = []byte("null")
	}
	for i, e := range info.Errors {
		t.Errors[i] = AttemptError{
			Attempt: e.Attempt, Node: e.Node, Start: e.Start.UTC(), End: e.End.UTC(),
			Outcome: string(e.Outcome), Error: e.Error, Stack: e.Stack,
		}
	}
	return t
}

// optTime is nil for the zero time, else the time in UTC.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return new(t.UTC())
}
