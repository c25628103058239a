package server

import (
	"net/http"
	"time"

	"github.com/keelq/keel"
)

// Brake is one task type's automatic brake.
type Brake struct {
	Type string `json:"type"`
	// State is closed, open or half_open.
	State       string     `json:"state"`
	OpenedAt    *time.Time `json:"opened_at,omitempty"`
	Until       *time.Time `json:"until,omitempty"`
	ProbeTaskID int64      `json:"probe_task_id,omitempty"`
	ProbeNode   string     `json:"probe_node,omitempty"`
	ProbeAt     *time.Time `json:"probe_at,omitempty"`
	Ratio       float64    `json:"ratio"`
	Attempts    int        `json:"attempts"`
	Reason      string     `json:"reason,omitempty"`
	ClosedAt    *time.Time `json:"closed_at,omitempty"`
	UpdatedAt   *time.Time `json:"updated_at,omitempty"`
	// Settings are the thresholds set at runtime (PUT
	// /v1/types/{name}/brake); absent fields are not set.
	Settings BrakeSettings `json:"settings"`
}

// BrakeSettings are a type's runtime brake thresholds, the body of PUT
// /v1/types/{name}/brake (it replaces them; {} clears them). Absent or 0:
// not set (the declared value or the default applies); window -1 turns the
// brake off.
type BrakeSettings struct {
	Window    int       `json:"window,omitempty"`
	Threshold float64   `json:"threshold,omitempty"`
	Cooldown  *Duration `json:"cooldown,omitempty"`
}

// BrakeList answers GET /v1/brakes.
type BrakeList struct {
	Brakes []Brake `json:"brakes"`
}

func brakeFromInfo(b keel.BrakeInfo) Brake {
	state := string(b.State)
	if state == "" {
		state = string(keel.BrakeClosed)
	}
	return Brake{Type: b.Type, State: state, OpenedAt: optTime(b.OpenedAt), Until: optTime(b.Until),
		ProbeTaskID: b.ProbeTaskID, ProbeNode: b.ProbeNode, ProbeAt: optTime(b.ProbeAt), Ratio: b.Ratio,
		Attempts: b.Attempts, Reason: b.Reason, ClosedAt: optTime(b.ClosedAt), UpdatedAt: optTime(b.UpdatedAt),
		Settings: BrakeSettings{Window: b.Settings.Window, Threshold: b.Settings.Threshold, Cooldown: optDuration(b.Settings.Cooldown)}}
}

// setBrake handles PUT /v1/types/{name}/brake: BrakeSettings → Brake.
func (s *server) setBrake(w http.ResponseWriter, r *http.Request) error {
	var p BrakeSettings
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &p); err != nil {
		return err
	}
	set := keel.BrakeSettings{Window: p.Window, Threshold: p.Threshold}
	if p.Cooldown != nil {
		set.Cooldown = time.Duration(*p.Cooldown)
	}
	b, err := s.c.SetBrake(r.Context(), r.PathValue("name"), set)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, brakeFromInfo(*b))
	return nil
}

// listBrakes handles GET /v1/brakes.
func (s *server) listBrakes(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	bs, err := s.c.Brakes(r.Context())
	if err != nil {
		return err
	}
	out := BrakeList{Brakes: make([]Brake, len(bs))}
	for i, b := range bs {
		out.Brakes[i] = brakeFromInfo(b)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// closeBrake handles POST /v1/types/{name}/brake/close: 409 when the
// brake is not open.
func (s *server) closeBrake(w http.ResponseWriter, r *http.Request) error {
	b, err := s.c.CloseBrake(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, brakeFromInfo(*b))
	return nil
}
