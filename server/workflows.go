package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/keelq/keel"
	pworkflow "github.com/keelq/keel/workflow"
)

// WorkflowCreateRequest is the body of POST /v1/workflows: a named set of
// tasks, each naming the tasks it needs. It is stored whole or not at all.
type WorkflowCreateRequest struct {
	Name string `json:"name"`
	// OnFailure is "cancel" (default: a task whose dependency died or was
	// cancelled is cancelled) or "continue" (it runs once every
	// dependency reached a final state).
	OnFailure string                `json:"on_failure,omitempty" api:"nonempty"`
	Tasks     []WorkflowTaskRequest `json:"tasks"`
}

// WorkflowTaskRequest is one task of a workflow: its name, the fields of
// an EnqueueRequest, and the names of the tasks it needs.
type WorkflowTaskRequest struct {
	Name           string            `json:"name"`
	Needs          []string          `json:"needs,omitempty"`
	Type           string            `json:"type"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	Queue          string            `json:"queue,omitempty" api:"nonempty"`
	Priority       *int              `json:"priority,omitempty"`
	RunAt          *time.Time        `json:"run_at,omitempty"`
	Delay          *Duration         `json:"delay,omitempty"`
	MaxAttempts    *int              `json:"max_attempts,omitempty"`
	Timeout        *Duration         `json:"timeout,omitempty"`
	UniqueBy       string            `json:"unique_by,omitempty" api:"nonempty"`
	Meta           map[string]string `json:"meta,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty" api:"nonempty"`
}

// WorkflowNode is one task of a workflow as the API returns it.
type WorkflowNode struct {
	Name   string `json:"name"`
	TaskID int64  `json:"task_id"`
	Type   string `json:"type,omitempty"`
	// State is the task's state, empty once it is no longer stored.
	State string `json:"state,omitempty"`
	// Held: still waiting for the tasks it needs.
	Held  bool     `json:"held"`
	Needs []string `json:"needs"`
}

// WorkflowRecord is a workflow as the API returns it: with its state and
// tasks from GET /v1/workflows/{id} and POST /v1/workflows, without them
// in a list.
type WorkflowRecord struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	OnFailure string    `json:"on_failure"`
	CreatedAt time.Time `json:"created_at"`
	// State is running, succeeded or failed.
	State string         `json:"state,omitempty"`
	Tasks []WorkflowNode `json:"tasks,omitempty"`
}

// WorkflowList answers GET /v1/workflows, newest first.
type WorkflowList struct {
	Workflows []WorkflowRecord `json:"workflows"`
}

// createWorkflow handles POST /v1/workflows: WorkflowCreateRequest → 201
// WorkflowRecord, with Location.
func (s *server) createWorkflow(w http.ResponseWriter, r *http.Request) error {
	if _, ok := r.Header["Idempotency-Key"]; ok {
		return badRequest("the Idempotency-Key header applies to POST /v1/tasks; give each task of a workflow its own idempotency_key")
	}
	var req WorkflowCreateRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	switch {
	case len(req.Tasks) == 0:
		return badRequest("field \"tasks\" must hold at least one task")
	case len(req.Tasks) > s.opts.MaxBatch:
		return badRequest("field \"tasks\" holds %d tasks, the limit is %d", len(req.Tasks), s.opts.MaxBatch)
	}
	spec := pworkflow.Spec{Name: req.Name, OnFailure: pworkflow.Policy(req.OnFailure), Tasks: make([]pworkflow.Task, len(req.Tasks))}
	for i, t := range req.Tasks {
		spec.Tasks[i] = pworkflow.Task{Name: t.Name, Needs: t.Needs, TaskSpec: job(EnqueueRequest{Type: t.Type, Payload: t.Payload,
			Queue: t.Queue, Priority: t.Priority, RunAt: t.RunAt, Delay: t.Delay, MaxAttempts: t.MaxAttempts, Timeout: t.Timeout,
			UniqueBy: t.UniqueBy, Meta: t.Meta, IdempotencyKey: t.IdempotencyKey})}
	}
	info, _, err := pworkflow.Enqueue(callerTrace(r), s.c, spec)
	if err != nil {
		return workflowError(0, enqueueError(err))
	}
	// Stored: from here on nothing may turn the answer into an error, or
	// the caller would submit it again.
	w.Header().Set("Location", "/v1/workflows/"+strconv.FormatInt(info.ID, 10))
	writeJSON(w, http.StatusCreated, workflowRecord(info))
	return nil
}

// getWorkflow handles GET /v1/workflows/{id} → WorkflowRecord with its
// tasks, their states and what each needs.
func (s *server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	id, err := pathID(r, "workflow")
	if err != nil {
		return err
	}
	info, err := pworkflow.Get(r.Context(), s.c, id)
	if err != nil {
		return workflowError(id, err)
	}
	writeJSON(w, http.StatusOK, workflowRecord(info))
	return nil
}

// listWorkflows handles GET /v1/workflows: newest first, paged by
// before_id and limit.
func (s *server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "before_id", "limit")
	if err != nil {
		return err
	}
	var f pworkflow.Filter
	if f.BeforeID, err = queryID(q, "before_id"); err != nil {
		return err
	}
	if f.Limit, err = queryLimit(q); err != nil {
		return err
	}
	infos, err := pworkflow.List(r.Context(), s.c, f)
	if err != nil {
		return workflowError(0, err)
	}
	list := WorkflowList{Workflows: make([]WorkflowRecord, len(infos))}
	for i, info := range infos {
		list.Workflows[i] = workflowRecord(info)
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// workflowError explains a failed call on workflow id: no such workflow
// is a 404. A driver that keeps no workflows is left to fail, a 409 in
// keel's words (ErrWrongState).
func workflowError(id int64, err error) error {
	if errors.Is(err, keel.ErrNotFound) {
		return &apiError{status: http.StatusNotFound, detail: fmt.Sprintf("workflow %d not found", id)}
	}
	return err
}

// workflowRecord converts a workflow for the API.
func workflowRecord(info *pworkflow.Info) WorkflowRecord {
	rec := WorkflowRecord{ID: info.ID, Name: info.Name, OnFailure: string(info.OnFailure), CreatedAt: info.CreatedAt.UTC(),
		State: string(info.State)}
	for _, n := range info.Tasks {
		needs := n.Needs
		if needs == nil {
			needs = []string{}
		}
		rec.Tasks = append(rec.Tasks, WorkflowNode{Name: n.Name, TaskID: n.TaskID, Type: n.Type, State: string(n.State),
			Held: n.Held, Needs: needs})
	}
	return rec
}
