package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	ibatch "github.com/keelq/keel/internal/batch"
	"github.com/keelq/keel/internal/shorten"
)

// BatchCreateRequest is the body of POST /v1/batches: the members, the
// callbacks and whether the batch stays open for more members. The batch
// and its members are stored together or not at all.
type BatchCreateRequest struct {
	Tasks []EnqueueRequest `json:"tasks"`
	// OnSuccess is enqueued once every member succeeded, OnFinish once
	// every member reached a final state; their payload becomes the Data
	// of the callback's batch event.
	OnSuccess *EnqueueRequest `json:"on_success,omitempty"`
	OnFinish  *EnqueueRequest `json:"on_finish,omitempty"`
	// Open leaves the batch open for POST /v1/batches/{id}/tasks; it
	// finishes only once sealed.
	Open bool `json:"open,omitempty"`
}

// BatchAddRequest is the body of POST /v1/batches/{id}/tasks: more
// members for an open batch and, when Seal is set, sealing it after them
// (with no tasks it only seals).
type BatchAddRequest struct {
	Tasks []EnqueueRequest `json:"tasks"`
	Seal  bool             `json:"seal,omitempty"`
}

// BatchRecord is a batch as the API returns it: its state and its
// members' counts by state.
type BatchRecord struct {
	ID int64 `json:"id"`
	// State is open (takes more members), running (sealed, members still
	// pending or running) or finished (callbacks enqueued).
	State     string `json:"state"`
	Total     int64  `json:"total"`
	Pending   int64  `json:"pending"`
	Running   int64  `json:"running"`
	Succeeded int64  `json:"succeeded"`
	Dead      int64  `json:"dead"`
	Cancelled int64  `json:"cancelled"`
	// Progress is the share of members in a final state, 0..1.
	Progress   float64    `json:"progress"`
	CreatedAt  time.Time  `json:"created_at"`
	SealedAt   *time.Time `json:"sealed_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// OnSuccessID and OnFinishID are the callback tasks, once enqueued.
	OnSuccessID int64 `json:"on_success_id,omitempty"`
	OnFinishID  int64 `json:"on_finish_id,omitempty"`
	// ETA is when the last pending member is estimated to finish, when
	// there is an estimate (GET /v1/batches/{id} only).
	ETA *time.Time `json:"eta,omitempty"`
}

// BatchTasks answers POST /v1/batches and POST /v1/batches/{id}/tasks:
// the batch and the tasks the request stored, in request order.
type BatchTasks struct {
	Batch BatchRecord `json:"batch"`
	Tasks []Task      `json:"tasks"`
}

// BatchList answers GET /v1/batches, newest first.
type BatchList struct {
	Batches []BatchRecord `json:"batches"`
}

// BatchMembers answers GET /v1/batches/{id}/tasks: a page of members,
// by id.
type BatchMembers struct {
	Tasks []Task `json:"tasks"`
}

// createBatch handles POST /v1/batches: BatchCreateRequest → 201
// BatchTasks, with Location.
func (s *server) createBatch(w http.ResponseWriter, r *http.Request) error {
	if _, ok := r.Header["Idempotency-Key"]; ok {
		return badRequest("the Idempotency-Key header applies to POST /v1/tasks; give each task of a batch its own idempotency_key")
	}
	var req BatchCreateRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	jobs, err := s.batchJobs(req.Tasks, false)
	if err != nil {
		return err
	}
	for _, cb := range []*EnqueueRequest{req.OnSuccess, req.OnFinish} {
		if cb != nil && cb.DependsOn != nil {
			return badRequest("a batch's callback cannot depend on other tasks")
		}
	}
	b := batch.Spec{Tasks: jobs, Open: req.Open}
	if req.OnSuccess != nil {
		b.OnSuccess = new(job(*req.OnSuccess))
	}
	if req.OnFinish != nil {
		b.OnFinish = new(job(*req.OnFinish))
	}
	info, infos, err := batch.Enqueue(callerTrace(r), s.c, b)
	if err != nil {
		return enqueueError(err)
	}
	// The batch is stored: from here on nothing may turn the answer into
	// an error, or the caller would submit it again.
	w.Header().Set("Location", "/v1/batches/"+strconv.FormatInt(info.ID, 10))
	writeJSON(w, http.StatusCreated, BatchTasks{Batch: batchRecord(info), Tasks: s.tasksWithETA(r.Context(), infos)})
	return nil
}

// addToBatch handles POST /v1/batches/{id}/tasks: BatchAddRequest → 200
// BatchTasks; 404 for no such batch, 409 for a sealed one.
func (s *server) addToBatch(w http.ResponseWriter, r *http.Request) error {
	if _, ok := r.Header["Idempotency-Key"]; ok {
		return badRequest("the Idempotency-Key header applies to POST /v1/tasks; give each task of a batch its own idempotency_key")
	}
	id, err := batchID(r)
	if err != nil {
		return err
	}
	var req BatchAddRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	jobs, err := s.batchJobs(req.Tasks, req.Seal)
	if err != nil {
		return err
	}
	infos, err := batch.Add(callerTrace(r), s.c, id, jobs, req.Seal)
	if err != nil {
		return batchError(id, enqueueError(err))
	}
	// The tasks are stored: from here on nothing may turn the answer into
	// an error, or the caller would submit them again.
	writeJSON(w, http.StatusOK, BatchTasks{Batch: s.batchAfterAdd(r.Context(), id, req.Seal), Tasks: s.tasksWithETA(r.Context(), infos)})
	return nil
}

// batchAfterAdd reads batch id back after members were added. A read that
// fails is logged and answered with the id and the state the add left
// (open, or running when it sealed): the members are stored either way.
func (s *server) batchAfterAdd(ctx context.Context, id int64, sealed bool) BatchRecord {
	info, err := batch.Get(ctx, s.c, id)
	if err == nil {
		return batchRecord(info)
	}
	if ctx.Err() == nil {
		s.log.Warn("keel server: reading a batch back after adding to it failed", "batch_id", id, "error", err)
	}
	rec := BatchRecord{ID: id, State: string(batch.Open)}
	if sealed {
		rec.State = string(batch.Running)
	}
	return rec
}

// sealBatch handles POST /v1/batches/{id}/seal → 200 BatchRecord.
func (s *server) sealBatch(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	id, err := batchID(r)
	if err != nil {
		return err
	}
	info, err := batch.Seal(r.Context(), s.c, id)
	if err != nil {
		return batchError(id, err)
	}
	writeJSON(w, http.StatusOK, batchRecord(info))
	return nil
}

// getBatch handles GET /v1/batches/{id} → BatchRecord with its ETA.
func (s *server) getBatch(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	id, err := batchID(r)
	if err != nil {
		return err
	}
	info, err := batch.Get(r.Context(), s.c, id)
	if err != nil {
		return batchError(id, err)
	}
	writeJSON(w, http.StatusOK, batchRecord(info))
	return nil
}

// listBatches handles GET /v1/batches: newest first, filtered by
// unfinished, paged by before_id and limit.
func (s *server) listBatches(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "unfinished", "before_id", "limit")
	if err != nil {
		return err
	}
	var f batch.Filter
	if f.Unfinished, err = queryBool(q, "unfinished"); err != nil {
		return err
	}
	if f.BeforeID, err = queryID(q, "before_id"); err != nil {
		return err
	}
	if f.Limit, err = queryLimit(q); err != nil {
		return err
	}
	infos, err := batch.List(r.Context(), s.c, f)
	if err != nil {
		return err
	}
	list := BatchList{Batches: make([]BatchRecord, len(infos))}
	for i, info := range infos {
		list.Batches[i] = batchRecord(info)
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// batchMembers handles GET /v1/batches/{id}/tasks: the members by id,
// after_id and limit paging; 404 for no such batch.
func (s *server) batchMembers(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "after_id", "limit")
	if err != nil {
		return err
	}
	id, err := batchID(r)
	if err != nil {
		return err
	}
	afterID, err := queryID(q, "after_id")
	if err != nil {
		return err
	}
	limit, err := queryLimit(q)
	if err != nil {
		return err
	}
	infos, err := batch.Members(r.Context(), s.c, id, afterID, limit)
	if err != nil {
		return batchError(id, err)
	}
	if len(infos) == 0 {
		// An empty page is also what a batch that does not exist gives.
		if _, err := batch.Get(r.Context(), s.c, id); err != nil {
			return batchError(id, err)
		}
	}
	list := BatchMembers{Tasks: make([]Task, len(infos))}
	for i, info := range infos {
		list.Tasks[i] = taskFromInfo(info)
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// batchJobs checks the number of tasks of a batch request and turns them
// into keel's enqueue arguments. None is allowed only when sealOnly (an
// add that only seals).
func (s *server) batchJobs(tasks []EnqueueRequest, sealOnly bool) ([]keel.TaskSpec, error) {
	switch {
	case len(tasks) == 0 && !sealOnly:
		return nil, badRequest("field \"tasks\" must hold at least one task")
	case len(tasks) > s.opts.MaxBatch:
		return nil, badRequest("field \"tasks\" holds %d tasks, the limit is %d", len(tasks), s.opts.MaxBatch)
	}
	jobs := make([]keel.TaskSpec, len(tasks))
	for i, t := range tasks {
		jobs[i] = job(t)
	}
	return jobs, nil
}

// tasksWithETA converts stored tasks and adds the estimated start of the
// pending ones (left out when estimating fails).
func (s *server) tasksWithETA(ctx context.Context, infos []*keel.TaskInfo) []Task {
	out := make([]Task, len(infos))
	ests := s.estimates(ctx, infos)
	for i, info := range infos {
		out[i] = taskFromInfo(info)
		if ests != nil {
			withEstimate(&out[i], ests[i])
		}
	}
	return out
}

// batchError explains a failed call on batch id: no such batch is a 404,
// a sealed one (for an add) a 409. A driver that keeps no batches is left
// to fail, a 409 in keel's words.
func batchError(id int64, err error) error {
	switch {
	case errors.Is(err, ibatch.ErrNoBatches):
		return err
	case errors.Is(err, keel.ErrNotFound):
		return &apiError{status: http.StatusNotFound, detail: fmt.Sprintf("batch %d not found", id)}
	case errors.Is(err, keel.ErrWrongState):
		return &apiError{status: http.StatusConflict, detail: fmt.Sprintf("batch %d is sealed: it takes no more tasks", id)}
	}
	return err
}

// batchID parses the {id} path value.
func batchID(r *http.Request) (int64, error) { return pathID(r, "batch") }

// batchRecord converts a batch for the API.
func batchRecord(info *batch.Info) BatchRecord {
	return BatchRecord{
		ID: info.ID, State: string(info.State), Total: info.Total, Pending: info.Pending, Running: info.Running,
		Succeeded: info.Succeeded, Dead: info.Dead, Cancelled: info.Cancelled, Progress: info.Progress,
		CreatedAt: info.CreatedAt.UTC(), SealedAt: optTime(info.SealedAt), FinishedAt: optTime(info.FinishedAt),
		OnSuccessID: info.OnSuccessID, OnFinishID: info.OnFinishID, ETA: optTime(info.ETA),
	}
}

// queryBool parses an optional true/false query parameter.
func queryBool(q map[string]string, name string) (bool, error) {
	v, ok := q[name]
	if !ok {
		return false, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, badRequest("query parameter %q must be true or false, got %q", name, shorten.String(v, 64))
}

// queryID parses an optional id query parameter: a positive integer, 0
// when absent.
func queryID(q map[string]string, name string) (int64, error) {
	v, ok := q[name]
	if !ok {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("query parameter %q must be a positive integer, got %q", name, shorten.String(v, 64))
	}
	return id, nil
}

// queryLimit parses the optional limit query parameter: 1..maxLimit,
// defaultLimit when absent.
func queryLimit(q map[string]string) (int, error) {
	v, ok := q["limit"]
	if !ok {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, badRequest("query parameter \"limit\" must be an integer in 1..%d, got %q", maxLimit, shorten.String(v, 64))
	}
	return n, nil
}
