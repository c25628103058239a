package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
	"github.com/keelq/keel/workflow"
)

// workflowsData is the workflow list.
type workflowsData struct {
	Workflows []*workflow.Info
	Next      int64 // before_id of the next page; 0: none
	First     bool  // no before_id: the newest workflows
}

// workflows is GET /workflows: workflows newest first, a page at a time
// (keyset pagination on the id).
func (d *dash) workflows(w http.ResponseWriter, r *http.Request, v *viewer) error {
	before, err := idParam(r.URL.Query().Get("before_id"), "before_id")
	if err != nil {
		return err
	}
	data := workflowsData{First: before == 0}
	list, err := workflow.List(r.Context(), d.c, workflow.Filter{BeforeID: before, Limit: pageSize + 1})
	if err != nil {
		return err
	}
	if len(list) > pageSize {
		list = list[:pageSize]
		data.Next = list[pageSize-1].ID
	}
	data.Workflows = list
	return d.render(w, r, http.StatusOK, "workflows", v, data)
}

// Sizes of the graph's drawing, in SVG units.
const (
	graphNodeW, graphNodeH = 168, 44
	graphColW, graphRowH   = 220, 64
	graphPad               = 12
)

// graphNode is one task drawn in the graph: its box's corner and its
// state's class.
type graphNode struct {
	workflow.Node
	X, Y  int
	Class string // the state's class: a state, or "waiting" for a held task
	Label string // the state as shown
}

// graphEdge is one arrow, from a needed task's right side to the left
// side of the task that needs it, as an SVG path.
type graphEdge struct{ Path string }

// workflowData is a workflow's page.
type workflowData struct {
	Workflow      *workflow.Info
	Nodes         []graphNode
	Edges         []graphEdge
	Width, Height int
	Counts        map[string]int // tasks by class
}

func (w workflowData) title() string { return fmt.Sprintf("Workflow %d", w.Workflow.ID) }

// workflowPage is GET /workflows/{id}: a workflow's state and its graph
// drawn in layers (a task one column right of the furthest task it
// needs), each task a link to its page.
func (d *dash) workflowPage(w http.ResponseWriter, r *http.Request, v *viewer) error {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return badRequest("a workflow id is a positive whole number, got %q", shorten.String(s, 32))
	}
	info, err := workflow.Get(r.Context(), d.c, id)
	if errors.Is(err, keel.ErrNotFound) {
		return userError{http.StatusNotFound, "Workflow not found", fmt.Sprintf("There is no workflow %d.", id)}
	}
	if err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, "workflow", v, layout(info))
}

// layout places a workflow's tasks in layers and draws the arrows between
// them.
func layout(info *workflow.Info) workflowData {
	data := workflowData{Workflow: info, Counts: map[string]int{}}
	layer := map[string]int{}
	var depth func(name string, seen map[string]bool) int
	byName := map[string]workflow.Node{}
	for _, n := range info.Tasks {
		byName[n.Name] = n
	}
	depth = func(name string, seen map[string]bool) int {
		if l, ok := layer[name]; ok {
			return l
		}
		if seen[name] { // never for a stored workflow: its needs have no cycle
			return 0
		}
		seen[name] = true
		l := 0
		for _, need := range byName[name].Needs {
			l = max(l, depth(need, seen)+1)
		}
		layer[name] = l
		return l
	}
	rows := map[int]int{}
	pos := map[string]graphNode{}
	cols, maxRows := 0, 0
	for _, n := range info.Tasks { // by id
		l := depth(n.Name, map[string]bool{})
		g := graphNode{Node: n, X: graphPad + l*graphColW, Y: graphPad + rows[l]*graphRowH, Class: string(n.State), Label: string(n.State)}
		switch {
		case n.State == "":
			g.Class, g.Label = "gone", "no longer stored"
		case n.Held:
			g.Class, g.Label = "waiting", "waiting"
		}
		rows[l]++
		cols, maxRows = max(cols, l+1), max(maxRows, rows[l])
		pos[n.Name] = g
		data.Nodes = append(data.Nodes, g)
		data.Counts[g.Class]++
	}
	for _, n := range data.Nodes {
		for _, need := range n.Needs {
			from, ok := pos[need]
			if !ok {
				continue
			}
			x1, y1 := from.X+graphNodeW, from.Y+graphNodeH/2
			x2, y2 := n.X-4, n.Y+graphNodeH/2
			mid := (x1 + x2) / 2
			data.Edges = append(data.Edges, graphEdge{Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2)})
		}
	}
	slices.SortStableFunc(data.Nodes, func(a, b graphNode) int { return a.X - b.X })
	data.Width = 2*graphPad + max(cols-1, 0)*graphColW + graphNodeW
	data.Height = 2*graphPad + max(maxRows-1, 0)*graphRowH + graphNodeH
	return data
}
