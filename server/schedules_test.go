package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestSchedulesAPI: list with next runs in the schedule's zone, pause,
// resume, trigger and delete; unknown and invalid names are refused and
// change nothing.
func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		now := time.Now()
		if err := b.drv.UpsertSchedules(t.Context(), []driver.ScheduleParams{
			{Name: "nightly", Spec: "0 3 * * *", TimeZone: "Asia/Tokyo", Type: typeReport, Queue: "default",
				Payload: json.RawMessage(`{"full":true}`), Missed: driver.MissedSkip, Now: now},
			{Name: "often", Spec: "@every 10s", TimeZone: "UTC", Type: typeEmail, Queue: "default",
				Payload: json.RawMessage(`{}`), Missed: driver.MissedRunOnce, Now: now},
		}); err != nil {
			t.Fatal(err)
		}
		var list ScheduleList
		b.call(t, "GET", "/v1/schedules", "").ok(t, http.StatusOK, &list)
		if len(list.Schedules) != 2 || list.Schedules[0].Name != "nightly" || list.Schedules[1].Name != "often" {
			t.Fatalf("list = %+v", list)
		}
		n := list.Schedules[0]
		tokyo, _ := time.LoadLocation("Asia/Tokyo")
		if n.NextRun == nil || n.NextRun.In(tokyo).Hour() != 3 || !n.NextRun.After(now) || n.NextRun.After(now.Add(24*time.Hour)) ||
			n.Missed != "skip" || n.Paused || string(n.Payload) != `{"full":true}` {
			t.Fatalf("nightly = %+v (next run %v)", n, n.NextRun)
		}
		var s ScheduleRecord
		b.call(t, "POST", "/v1/schedules/nightly/pause", "").ok(t, http.StatusOK, &s)
		if !s.Paused || s.Name != "nightly" {
			t.Fatalf("paused = %+v", s)
		}
		var task Task
		b.call(t, "POST", "/v1/schedules/nightly/trigger", "").ok(t, http.StatusCreated, &task)
		if task.Type != typeReport || task.Queue != "default" || string(task.Payload) != `{"full": true}` && string(task.Payload) != `{"full":true}` {
			t.Fatalf("triggered task = %+v", task)
		}
		b.call(t, "POST", "/v1/schedules/nightly/resume", "").ok(t, http.StatusOK, &s)
		if s.Paused {
			t.Fatalf("resumed = %+v", s)
		}

		before := b.state(t)
		b.call(t, "POST", "/v1/schedules/nope/pause", "").problem(t, http.StatusNotFound, `no schedule "nope"`)
		b.call(t, "POST", "/v1/schedules/nope/trigger", "").problem(t, http.StatusNotFound, `no schedule "nope"`)
		b.call(t, "POST", "/v1/schedules/a%20b/resume", "").problem(t, http.StatusBadRequest, "invalid schedule name")
		b.call(t, "GET", "/v1/schedules?x=1", "").problem(t, http.StatusBadRequest, "x")
		b.unchanged(t, before)

		b.call(t, "DELETE", "/v1/schedules/often", "").ok(t, http.StatusOK, &s)
		b.call(t, "GET", "/v1/schedules", "").ok(t, http.StatusOK, &list)
		if len(list.Schedules) != 1 || list.Schedules[0].Name != "nightly" {
			t.Fatalf("after delete: %+v", list)
		}
		b.call(t, "DELETE", "/v1/schedules/often", "").problem(t, http.StatusNotFound, `no schedule "often"`)
	})
}
