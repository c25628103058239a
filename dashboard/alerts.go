package dashboard

import (
	"net/http"
	"strconv"

	"github.com/keelq/keel"
)

// alertsPage is how many alerts the alert page shows at once.
const alertsPage = 50

// alertsData is the alert history page.
type alertsData struct {
	Alerts []*keel.Alert
	Next   int64 // BeforeID of the next page; 0: none
	First  bool
}

// alerts is GET /alerts: alert history, newest first, a page at a time.
func (d *dash) alerts(w http.ResponseWriter, r *http.Request, v *viewer) error {
	f := keel.AlertFilter{Limit: alertsPage + 1}
	if s := r.URL.Query().Get("cursor"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return badRequest("cursor must be an alert id, got %q", s)
		}
		f.BeforeID = id
	}
	as, err := d.c.Alerts(r.Context(), f)
	if err != nil {
		return err
	}
	data := alertsData{Alerts: as, First: f.BeforeID == 0}
	if len(as) > alertsPage {
		data.Alerts = as[:alertsPage]
		data.Next = as[alertsPage-1].ID
	}
	return d.render(w, r, http.StatusOK, "alerts", v, data)
}

// nodesData is the nodes page: the node registry, and keel's own work
// that the nodes run besides users' tasks.
type nodesData struct {
	Nodes []keel.NodeInfo
	Keel  keel.KeelStats
}

// nodes is GET /nodes: the worker processes in the node registry.
func (d *dash) nodes(w http.ResponseWriter, r *http.Request, v *viewer) error {
	ns, err := d.c.Nodes(r.Context())
	if err != nil {
		return err
	}
	st, err := d.c.Stats(r.Context())
	if err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, "nodes", v, nodesData{Nodes: ns, Keel: st.Keel})
}
