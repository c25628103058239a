package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// staticVersion is a hash of every static file: it is part of their URLs,
// so they can be cached for a year and still change with a new build.
var staticVersion = sync.OnceValue(func() string {
	h := sha256.New()
	_ = fs.WalkDir(staticFS, "static", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
})

// static serves the embedded files under static/<version>/.
func (d *dash) static(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	name := r.PathValue("file")
	b, err := staticFS.ReadFile(path.Join("static", path.Clean("/"+name)))
	if err != nil {
		http.NotFound(w, r)
		return nil
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	if r.PathValue("version") == staticVersion() {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	return nil
}

// page is what the layout renders around a page's content.
type page struct {
	Title  string
	Nav    string // the menu entry to highlight
	Base   string // the prefix, for links
	Static string // the static files' base URL
	Viewer *viewer
	Login  bool // tokens are configured
	Now    time.Time
	Data   any
}

// pages are the page templates, each parsed with the layout.
var pages = sync.OnceValue(func() map[string]*template.Template {
	base := template.Must(template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/keelwork.html"))
	out := map[string]*template.Template{}
	entries, err := templateFS.ReadDir("templates")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".html")
		if name == "layout" || name == "keelwork" { // keelwork: a section of the overview and the nodes page
			continue
		}
		out[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+e.Name()))
	}
	return out
})

// titles are the pages' titles and menu entries.
var titles = map[string][2]string{
	"login": {"Log in", ""}, "error": {"Error", ""}, "overview": {"Overview", "overview"},
	"queues": {"Queues & types", "queues"}, "tasks": {"Tasks", "tasks"}, "task": {"Task", "tasks"},
	"batches": {"Batches", "batches"}, "batch": {"Batch", "batches"}, "sequences": {"Blocked sequences", "sequences"},
	"workflows": {"Workflows", "workflows"}, "workflow": {"Workflow", "workflows"},
	"dead": {"Dead letters", "dead"}, "confirm": {"Confirm", "dead"}, "alerts": {"Alerts", "alerts"}, "nodes": {"Nodes", "nodes"},
	"schedules": {"Schedules", "schedules"}, "sources": {"Sources", "sources"}, "rejected": {"Rejected message", "sources"},
	"rejected_delete": {"Delete rejected message", "sources"},
}

// render writes page name with data inside the layout; fragment, when
// set, names a template to write alone (an htmx refresh).
func (d *dash) render(w http.ResponseWriter, r *http.Request, status int, name string, v *viewer, data any, fragment ...string) error {
	t, ok := pages()[name]
	if !ok {
		return fmt.Errorf("dashboard: no template %q", name)
	}
	if v == nil {
		v = &viewer{}
	}
	tt := titles[name]
	p := page{Title: tt[0], Nav: tt[1], Base: d.prefix, Static: d.prefix + "static/" + staticVersion() + "/",
		Viewer: v, Login: d.auth.enabled(), Now: d.now(), Data: data}
	if t, ok := data.(interface{ title() string }); ok {
		p.Title = t.title()
	}
	var buf bytes.Buffer
	exec := "layout"
	if len(fragment) > 0 {
		exec = fragment[0]
	}
	if err := t.ExecuteTemplate(&buf, exec, p); err != nil {
		return fmt.Errorf("dashboard: render %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// errorPage shows an error in words, in the layout.
func (d *dash) errorPage(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	v := d.auth.viewer(r, d.now())
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "%s: %s", title, msg)
		return
	}
	if err := d.render(w, r, status, "error", v, errorData{Status: status, Heading: title, Message: msg}); err != nil {
		d.log.Error("keel dashboard: render error page", "err", err)
		http.Error(w, title+": "+msg, status)
	}
}

type errorData struct {
	Status           int
	Heading, Message string
}

func (e errorData) title() string { return e.Heading }

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"num":    num,
	"numi":   func(n int) string { return num(int64(n)) },
	"lat":    lat,
	"dur":    dur,
	"oldest": oldest,
	"ago":    ago,
	"stamp":  stamp,
	"zoned":  func(t time.Time) string { return t.Format("2006-01-02 15:04:05 -07:00") },
	"rate":   func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + "/s" },
	"pct":    func(a, b int64) string { return pct(a, b) },
	"mul100": func(f float64) float64 { return 100 * f },
	"views": func() []keel.View {
		return []keel.View{keel.ViewReady, keel.ViewScheduled, keel.ViewRetrying, keel.ViewRunning, keel.ViewDead}
	},
	"states":      func() []keel.State { return states },
	"backlog":     backlog,
	"add":         func(a, b int) int { return a + b },
	"query":       query,
	"sortkeys":    sortKeys,
	"join":        strings.Join,
	"add64":       func(a, b int64) int64 { return a + b },
	"vw":          func(m map[keel.View]int64, v string) int64 { return m[keel.View(v)] },
	"sc":          func(m map[keel.State]int64, s string) int64 { return m[keel.State(s)] },
	"nav":         func() []navItem { return navItems },
	"fails":       func(t keel.TypeStats) string { return pct(t.FailedLastHour, t.AttemptsLastHour) },
	"sourceClass": sourceClass,
	"batchClass":  batchClass,
	"share":       func(f float64) string { return strconv.FormatFloat(math.Floor(1000*f)/10, 'f', 1, 64) + "%" },
}

// batchClass is the badge colour of a batch's state: a finished batch
// with a dead or cancelled member shows as failed.
func batchClass(b *batch.Info) string {
	switch {
	case b.State == batch.Open:
		return "scheduled"
	case b.State != batch.Finished:
		return "running"
	case b.Dead+b.Cancelled > 0:
		return "dead"
	}
	return "succeeded"
}

// sourceClass is the badge colour of a source's state.
func sourceClass(state string) string {
	switch state {
	case "running":
		return "succeeded"
	case "paused":
		return "scheduled"
	case "backlog", "waiting":
		return "retrying"
	case "connecting":
		return "dead"
	}
	return "cancelled"
}

// navItem is one entry of the menu.
type navItem struct{ Key, Path, Label string }

var navItems = []navItem{
	{"overview", "", "Overview"}, {"queues", "queues", "Queues & types"}, {"tasks", "tasks", "Tasks"},
	{"batches", "batches", "Batches"}, {"workflows", "workflows", "Workflows"}, {"dead", "dead", "Dead letters"}, {"alerts", "alerts", "Alerts"}, {"nodes", "nodes", "Nodes"},
	{"schedules", "schedules", "Schedules"}, {"sequences", "sequences", "Sequences"}, {"sources", "sources", "Sources"},
}

var states = []keel.State{keel.StatePending, keel.StateRunning, keel.StateSucceeded, keel.StateDead, keel.StateCancelled}

// backlog is the tasks waiting: ready, scheduled and retrying.
func backlog(v map[keel.View]int64) int64 {
	return v[keel.ViewReady] + v[keel.ViewScheduled] + v[keel.ViewRetrying]
}

// num writes an integer with thin groups: 1 234 567.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteRune(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// dur writes a duration briefly: 3s, 4m10s, 2h5m, 3d4h; "–" for 0.
// oldest shows the oldest ready task's age: "–" only when no task is
// ready; the age is counted in whole minutes, so one ready for less than a
// minute shows as "<1m".
func oldest(age time.Duration, ready int64) string {
	switch {
	case ready == 0:
		return "–"
	case age < time.Minute:
		return "<1m"
	}
	return dur(age)
}

func dur(x time.Duration) string {
	switch {
	case x <= 0:
		return "–"
	case x < time.Second:
		return x.Round(time.Millisecond).String()
	case x < time.Minute:
		return x.Round(time.Second).String()
	case x < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(x.Minutes()), int(x.Seconds())%60)
	case x < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(x.Hours()), int(x.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(x.Hours())/24, int(x.Hours())%24)
}

// lat writes a latency: like dur, but 0 is "0s" and below a millisecond
// keeps its microseconds.
func lat(x time.Duration) string {
	switch {
	case x <= 0:
		return "0s"
	case x < time.Millisecond:
		return x.Round(time.Microsecond).String()
	}
	return dur(x)
}

// ago writes how long before now t was: "3m10s ago"; "never" for zero.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	if t.After(now) {
		return "in " + dur(t.Sub(now))
	}
	if now.Sub(t) < time.Second {
		return "just now"
	}
	return dur(now.Sub(t)) + " ago"
}

// stamp writes a time in UTC to the second; "–" for zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func pct(a, b int64) string {
	if b == 0 {
		return "–"
	}
	return strconv.FormatFloat(math.Round(1000*float64(a)/float64(b))/10, 'f', 1, 64) + "%"
}

// query builds a query string from pairs, leaving out empty values.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func sortKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
