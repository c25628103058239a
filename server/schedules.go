package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/keelq/keel"
)

// ScheduleRecord is one schedule in GET /v1/schedules. Times are in the
// schedule's time zone.
type ScheduleRecord struct {
	Name     string          `json:"name"`
	Spec     string          `json:"spec"`
	TimeZone string          `json:"time_zone"`
	Type     string          `json:"type"`
	Queue    string          `json:"queue"`
	Payload  json.RawMessage `json:"payload"`
	Priority int             `json:"priority"`
	Missed   string          `json:"missed"` // run_once or skip
	Paused   bool            `json:"paused"`
	// LastTick is the last tick enqueued or passed over (at first, when
	// the schedule was stored).
	LastTick time.Time `json:"last_tick"`
	// NextRun is the next tick after now; absent while paused or when
	// the spec has no further tick.
	NextRun *time.Time `json:"next_run,omitempty"`
	// Due: a tick came due that no leader enqueued yet.
	Due       bool      `json:"due"`
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ScheduleList is the body of GET /v1/schedules.
type ScheduleList struct {
	Schedules []ScheduleRecord `json:"schedules"`
}

// listSchedules handles GET /v1/schedules.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	list, err := s.c.Schedules(r.Context())
	if err != nil {
		return err
	}
	out := ScheduleList{Schedules: make([]ScheduleRecord, 0, len(list))}
	for _, si := range list {
		out.Schedules = append(out.Schedules, scheduleRecord(si))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pauseSchedule handles POST /v1/schedules/{name}/pause.
func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	si, err := s.c.PauseSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleRecord(si))
	return nil
}

// resumeSchedule handles POST /v1/schedules/{name}/resume.
func (s *server) resumeSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	si, err := s.c.ResumeSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleRecord(si))
	return nil
}

// triggerSchedule handles POST /v1/schedules/{name}/trigger: one task of
// the schedule now, answered with 201 and the task.
func (s *server) triggerSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	info, err := s.c.TriggerSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, taskFromInfo(info))
	return nil
}

// deleteSchedule handles DELETE /v1/schedules/{name}: it answers with
// the schedule as it was.
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	si, err := s.c.GetSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	if err := s.c.DeleteSchedule(r.Context(), si.Name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleRecord(si))
	return nil
}

func scheduleRecord(si *keel.ScheduleInfo) ScheduleRecord {
	rec := ScheduleRecord{Name: si.Name, Spec: si.Spec, TimeZone: si.TimeZone, Type: si.Type, Queue: si.Queue,
		Payload: si.Payload, Priority: si.Priority, Missed: string(si.Missed), Paused: si.Paused, LastTick: si.LastTick,
		Due: si.Due, Error: si.Error, CreatedAt: si.CreatedAt.UTC(), UpdatedAt: si.UpdatedAt.UTC()}
	if !si.NextRun.IsZero() {
		next := si.NextRun
		rec.NextRun = &next
	}
	return rec
}
