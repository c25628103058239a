package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/check"
)

// listQueues handles GET /v1/queues.
func (s *server) listQueues(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	qs, err := s.c.Queues(r.Context())
	if err != nil {
		return err
	}
	list := QueueList{Queues: make([]Queue, len(qs))}
	for i := range qs {
		list.Queues[i] = queueFromInfo(&qs[i])
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// pauseQueue handles POST /v1/queues/{name}/pause.
func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request) error {
	return s.updateQueue(w, r, keel.QueueUpdate{Paused: new(true)})
}

// resumeQueue handles POST /v1/queues/{name}/resume.
func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) error {
	return s.updateQueue(w, r, keel.QueueUpdate{Paused: new(false)})
}

// patchQueue handles PATCH /v1/queues/{name}: QueuePatch → Queue.
func (s *server) patchQueue(w http.ResponseWriter, r *http.Request) error {
	var p QueuePatch
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &p); err != nil {
		return err
	}
	return s.updateQueue(w, r, keel.QueueUpdate{Paused: p.Paused, Concurrency: p.Concurrency, Rate: p.Rate, Burst: p.Burst})
}

func (s *server) updateQueue(w http.ResponseWriter, r *http.Request, u keel.QueueUpdate) error {
	q, err := s.c.UpdateQueue(r.Context(), r.PathValue("name"), u)
	if err != nil {
		return err
	}
	out := queueFromInfo(q)
	if u.Concurrency != nil && q.MaxWorkers > 0 && q.Concurrency > q.MaxWorkers {
		out.Warnings = []string{fmt.Sprintf("concurrency %d is above the %d workers node %s runs for queue %s: there it caps nothing",
			q.Concurrency, q.MaxWorkers, s.c.Node(), q.Name)}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func queueFromInfo(q *keel.QueueInfo) Queue {
	return Queue{Name: q.Name, Counts: counts(q.Counts), Paused: q.Paused, Concurrency: q.Concurrency, Rate: q.Rate, Burst: q.Burst,
		UpdatedAt: optTime(q.UpdatedAt)}
}

// listTypes handles GET /v1/types.
func (s *server) listTypes(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	ts, err := s.c.Types(r.Context())
	if err != nil {
		return err
	}
	list := TypeList{Types: make([]TaskType, len(ts))}
	for i := range ts {
		list.Types[i] = typeFromInfo(&ts[i])
		ramp, err := s.c.GetRamp(r.Context(), ts[i].Name)
		switch {
		case err == nil:
			list.Types[i].Ramp = rampFromState(ramp)
		case !errors.Is(err, keel.ErrNotFound) && !errors.Is(err, keel.ErrInvalid):
			return err
		}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// pauseType handles POST /v1/types/{name}/pause.
func (s *server) pauseType(w http.ResponseWriter, r *http.Request) error {
	return s.updateType(w, r, keel.TypeUpdate{Paused: new(true)})
}

// resumeType handles POST /v1/types/{name}/resume.
func (s *server) resumeType(w http.ResponseWriter, r *http.Request) error {
	return s.updateType(w, r, keel.TypeUpdate{Paused: new(false)})
}

// patchType handles PATCH /v1/types/{name}: TypePatch → TaskType.
func (s *server) patchType(w http.ResponseWriter, r *http.Request) error {
	var p TypePatch
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &p); err != nil {
		return err
	}
	return s.updateType(w, r, keel.TypeUpdate{
		Paused: p.Paused, Concurrency: p.Concurrency, Rate: p.Rate, Burst: p.Burst, Timeout: stdDuration(p.Timeout), MaxAttempts: p.MaxAttempts,
		BackoffBase: stdDuration(p.BackoffBase), BackoffMax: stdDuration(p.BackoffMax),
	})
}

func (s *server) updateType(w http.ResponseWriter, r *http.Request, u keel.TypeUpdate) error {
	t, err := s.c.UpdateType(r.Context(), r.PathValue("name"), u)
	if err != nil {
		return err
	}
	out := typeFromInfo(t)
	if u.Concurrency != nil && t.Concurrency > 0 {
		if n := s.workers(r); n > 0 && t.Concurrency > n {
			out.Warnings = []string{fmt.Sprintf("concurrency %d is above the %d workers node %s runs in all its queues: there it caps nothing",
				t.Concurrency, n, s.c.Node())}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workers is how many tasks this node runs at once in all its queues; 0
// when it works none, or when they cannot be read (the change is stored
// already: only the warning is left out, and logged).
func (s *server) workers(r *http.Request) int {
	qs, err := s.c.Queues(r.Context())
	if err != nil {
		s.log.Warn("keel server: cannot check a concurrency against this node's workers", "error", err)
		return 0
	}
	n := 0
	for _, q := range qs {
		n += q.MaxWorkers
	}
	return n
}

func typeFromInfo(t *keel.TypeInfo) TaskType {
	return TaskType{
		Name: t.Name, Counts: counts(t.Counts), Paused: t.Paused, Concurrency: t.Concurrency, Rate: t.Rate, Burst: t.Burst,
		MaxAttempts: t.MaxAttempts,
		Timeout:     optDuration(t.Timeout), BackoffBase: optDuration(t.BackoffBase), BackoffMax: optDuration(t.BackoffMax),
		UpdatedAt: optTime(t.UpdatedAt), OnDead: t.OnDead, Brake: brakeFromInfo(t.Brake),
	}
}

// counts converts task counts by state to the wire form (never null).
func counts(m map[keel.State]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for st, n := range m {
		out[string(st)] = n
	}
	return out
}

func stdDuration(d *Duration) *time.Duration {
	if d == nil {
		return nil
	}
	return new(time.Duration(*d))
}

// optDuration is nil for zero (no override).
func optDuration(d time.Duration) *Duration {
	if d == 0 {
		return nil
	}
	return new(Duration(d))
}

// getRamp handles GET /v1/types/{name}/ramp.
func (s *server) getRamp(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	st, err := s.c.GetRamp(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rampFromState(st))
	return nil
}

// startRamp handles PUT /v1/types/{name}/ramp: RampRequest → RampInfo.
func (s *server) startRamp(w http.ResponseWriter, r *http.Request) error {
	var p RampRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &p); err != nil {
		return err
	}
	// keel reads a zero Every or MinAttempts as its default; sent, a zero
	// is refused here with the value as sent.
	ramp := keel.Ramp{Steps: p.Steps}
	if p.Every != nil {
		if ramp.Every = time.Duration(*p.Every); ramp.Every == 0 {
			return badRequest("ramp every must be in 1s..168h, got %s: no interval (leave it out for the default 10m)", check.Duration(0))
		}
	}
	if p.MaxFailureRatio != nil {
		ramp.MaxFailureRatio = *p.MaxFailureRatio
	}
	if p.MinAttempts != nil {
		if ramp.MinAttempts = *p.MinAttempts; ramp.MinAttempts == 0 {
			return badRequest("ramp min_attempts must be in 1..1000000, got 0: no attempts judge nothing (leave it out for the default 20)")
		}
	}
	st, err := s.c.StartRamp(r.Context(), r.PathValue("name"), ramp)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rampFromState(st))
	return nil
}

// stopRamp handles POST /v1/types/{name}/ramp/stop.
func (s *server) stopRamp(w http.ResponseWriter, r *http.Request) error {
	st, err := s.c.StopRamp(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rampFromState(st))
	return nil
}

// rampFromState is the wire form of a ramp.
func rampFromState(st *keel.RampState) *RampInfo {
	out := &RampInfo{
		Type: st.Type, Steps: st.Steps, Every: Duration(st.Every), MaxFailureRatio: st.MaxFailureRatio,
		MinAttempts: st.MinAttempts, Step: st.Step + 1, Concurrency: st.Concurrency(), State: "running",
		Reason: st.Reason, Note: st.Note, StepAt: st.StepAt, StartedAt: st.StartedAt, UpdatedAt: st.UpdatedAt,
	}
	switch {
	case st.Stopped:
		out.State = "stopped"
	case st.Done:
		out.State = "done"
	default:
		out.NextAt = new(st.NextAt)
	}
	return out
}
