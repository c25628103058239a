package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// Type is one of the user's task types (keel.toml's [types]): with
// Options.Types the scenarios run their work as tasks of these types,
// round robin, with each type's queue, priority, timeout and cluster
// limits, worked by the runner's no-op handler (its ledger write) in
// place of the type's own handler or url. The retries stay the runner's
// (up to 100 attempts), so a kill never dead-letters a task.
type Type struct {
	Name     string        `json:"name"`
	Queue    string        `json:"queue,omitempty"`
	Priority int           `json:"priority,omitempty"`
	Timeout  time.Duration `json:"timeout,omitempty"`
	// Concurrency caps the type's running tasks across the cluster; the
	// run checks that no more ran at once. 0: no cap.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate caps the type's starts per second across the cluster, with a
	// bucket of Burst (0: max(1, ceil(Rate))); the run checks the starts
	// against it. 0: no cap.
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
}

func (t Type) validate() error {
	if !driver.ValidName(t.Name) {
		return fmt.Errorf("type %q: not a valid type name", t.Name)
	}
	if t.Queue != "" && !driver.ValidName(t.Queue) {
		return fmt.Errorf("type %s: queue %q is not a valid queue name", t.Name, t.Queue)
	}
	if t.Name == workType || t.Name == stepsType {
		return fmt.Errorf("type %q: the name is the run's own", t.Name)
	}
	if t.Timeout != 0 && t.Timeout < 2*workDelay {
		return fmt.Errorf("type %s: timeout %v is shorter than twice the run's handler (%v), which would fail every task", t.Name, t.Timeout, workDelay)
	}
	if t.Concurrency < 0 || t.Rate < 0 || t.Burst < 0 || math.IsNaN(t.Rate) || math.IsInf(t.Rate, 0) {
		return fmt.Errorf("type %s: concurrency, rate and burst must not be negative", t.Name)
	}
	return nil
}

func (t Type) queue() string { return or(t.Queue, keel.DefaultQueue) }

// options are the type's settings as keel's options.
func (t Type) options() []keel.Option {
	opts := []keel.Option{keel.Queue(t.queue()), keel.Priority(t.Priority)}
	if t.Timeout > 0 {
		opts = append(opts, keel.Timeout(t.Timeout))
	}
	return opts
}

// typesEnv is types as the worker process's variable, and parseTypes reads
// it back.
func typesEnv(types []Type) string {
	b, _ := json.Marshal(types) //nolint:errchkjson // plain fields
	return string(b)
}

func parseTypes(s string) ([]Type, error) {
	if s == "" {
		return nil, nil
	}
	var out []Type
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("%s: %w", envTypes, err)
	}
	return out, nil
}

// workTypes are the task types the scenarios' work is spread over.
func (r *run) workTypes() []string {
	if len(r.o.Types) == 0 {
		return []string{workType}
	}
	out := make([]string, len(r.o.Types))
	for i, t := range r.o.Types {
		out[i] = t.Name
	}
	return out
}

// storeLimits stores the types' cluster limits in the scenario's space,
// as keel serve stores keel.toml's when it starts.
func (r *run) storeLimits() error {
	if r.o.unlimited {
		return nil
	}
	for _, t := range r.o.Types {
		if t.Concurrency == 0 && t.Rate == 0 && t.Burst == 0 {
			continue
		}
		u := keel.TypeUpdate{Concurrency: &t.Concurrency, Rate: &t.Rate, Burst: &t.Burst}
		if _, err := r.client.UpdateType(r.ctx, t.Name, u); err != nil {
			return fmt.Errorf("type %s: store its limits: %w", t.Name, err)
		}
	}
	return nil
}

// checkLimits checks every limited type's attempts, from the task table:
// no more than Concurrency ran at once (an attempt holds its slot from
// its claim to its end, or to its rescue when its worker died), and no
// window of rateWindow saw more starts than the bucket allows (Burst plus
// Rate for the window, with a tenth of slack for the clocks' stamps).
func (r *run) checkLimits() error {
	limited := map[string]Type{}
	for _, t := range r.o.Types {
		if t.Concurrency > 0 || t.Rate > 0 {
			limited[t.Name] = t
		}
	}
	if len(limited) == 0 {
		return nil
	}
	type edge struct {
		at    time.Time
		delta int
	}
	edges, starts := map[string][]edge{}, map[string][]time.Time{}
	for _, id := range r.ids {
		t, err := r.drv.Get(r.ctx, id)
		if err != nil {
			return err
		}
		if _, ok := limited[t.Type]; !ok {
			continue
		}
		add := func(start, end time.Time) {
			edges[t.Type] = append(edges[t.Type], edge{start, 1}, edge{end, -1})
			starts[t.Type] = append(starts[t.Type], start)
		}
		for _, ae := range t.Errors {
			add(ae.Start, ae.End)
		}
		if t.State == driver.StateSucceeded {
			add(t.AttemptedAt, t.FinishedAt)
		}
	}
	for name, t := range limited {
		es := edges[name]
		if len(es) == 0 {
			continue // the scenario ran none of its tasks (sigterm, kill-in-step)
		}
		// An end and a start at one instant: the end first.
		sort.Slice(es, func(i, j int) bool {
			return es[i].at.Before(es[j].at) || es[i].at.Equal(es[j].at) && es[i].delta < es[j].delta
		})
		running, most := 0, 0
		for _, e := range es {
			running += e.delta
			most = max(most, running)
		}
		if t.Concurrency > 0 {
			if most > t.Concurrency {
				r.failf("type %s: %d tasks ran at once, over its concurrency of %d", name, most, t.Concurrency)
			} else {
				r.notef("type %s: at most %d of its %d allowed ran at once", name, most, t.Concurrency)
			}
		}
		if t.Rate > 0 {
			ss := starts[name]
			slices.SortFunc(ss, func(a, b time.Time) int { return a.Compare(b) })
			burst := t.Burst
			if burst == 0 {
				burst = max(1, int(math.Ceil(t.Rate)))
			}
			allowed := float64(burst) + t.Rate*rateWindow.Seconds()*1.1
			peak := 0
			for i, j := 0, 0; i < len(ss); i++ {
				for ss[i].Sub(ss[j]) >= rateWindow {
					j++
				}
				peak = max(peak, i-j+1)
			}
			if float64(peak) > allowed {
				r.failf("type %s: %d starts within %v, over its rate of %g a second with a burst of %d", name, peak, rateWindow, t.Rate, burst)
			} else {
				r.notef("type %s: at most %d starts within %v (rate %g a second, burst %d)", name, peak, rateWindow, t.Rate, burst)
			}
		}
	}
	return nil
}

// rateWindow is the window the starts of a rate-limited type are counted in.
const rateWindow = 2 * time.Second
