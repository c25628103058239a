package dashboard

import (
	"net/http"

	"github.com/keelq/keel"
)

// schedulesData is the schedules page.
type schedulesData struct {
	Schedules []*keel.ScheduleInfo
	Done      string // what the last action changed
}

// schedules is GET /schedules: periodic tasks' schedules with their next
// runs in each schedule's zone.
func (d *dash) schedules(w http.ResponseWriter, r *http.Request, v *viewer) error {
	list, err := d.c.Schedules(r.Context())
	if err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, "schedules", v, schedulesData{Schedules: list, Done: doneMessage(r.URL.Query())})
}

// updateSchedule is POST /schedules/{name}: op=pause, resume or trigger.
func (d *dash) updateSchedule(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	if err := form(w, r); err != nil {
		return err
	}
	name := r.PathValue("name")
	var err error
	done := "schedule"
	switch op := r.PostForm.Get("op"); op {
	case "pause":
		_, err = d.c.PauseSchedule(r.Context(), name)
	case "resume":
		_, err = d.c.ResumeSchedule(r.Context(), name)
	case "trigger":
		_, err = d.c.TriggerSchedule(r.Context(), name)
		done = "triggered"
	default:
		return badRequest("op must be pause, resume or trigger, got %q", op)
	}
	if err != nil {
		return err
	}
	return d.back(w, r, "schedules", done, name)
}
