package engine

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// settings holds the runtime settings (keel_settings) as last read.
type settings struct {
	snap atomic.Pointer[snapshot]
	mu   sync.Mutex // serializes writers
	loop *service.Loop
}

// snapshot is one reading of the runtime settings.
type snapshot struct {
	queues      map[string]driver.Setting
	types       map[string]driver.Setting
	pausedTypes []string
	// limited are the unpaused types with a cluster-wide concurrency or a
	// rate: claimed one type at a time through Driver.ClaimLimited.
	limited []driver.Setting
}

func newSnapshot(rows []driver.Setting) *snapshot {
	s := &snapshot{queues: map[string]driver.Setting{}, types: map[string]driver.Setting{}}
	for _, r := range rows {
		switch r.Kind {
		case driver.SettingQueue:
			s.queues[r.Name] = r
		case driver.SettingType:
			s.types[r.Name] = r
			if r.Paused {
				s.pausedTypes = append(s.pausedTypes, r.Name)
			} else if r.Concurrency > 0 || r.Rate > 0 {
				s.limited = append(s.limited, r)
			}
		}
	}
	return s
}

func (s *settings) get() *snapshot {
	if p := s.snap.Load(); p != nil {
		return p
	}
	return &snapshot{}
}

// load reads keel_settings and reports whether anything changed.
func (s *settings) load(ctx context.Context, e *Engine) bool {
	lctx, cancel := context.WithTimeout(ctx, max(e.cfg.SettingsInterval, time.Second))
	defer cancel()
	rows, err := e.drv.ListSettings(lctx)
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keel: reading runtime settings failed", "error", err)
		}
		return false
	}
	next := newSnapshot(rows)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.get()
	s.snap.Store(next)
	return !reflect.DeepEqual(old.queues, next.queues) || !reflect.DeepEqual(old.types, next.types)
}

// ApplySetting puts one changed setting into the snapshot at once (the
// refresh loop brings the others' changes) and wakes the queues it may
// have unblocked; a nil Engine (a client not started) does nothing.
func (e *Engine) ApplySetting(set driver.Setting) {
	if e == nil {
		return
	}
	s := &e.settings
	s.mu.Lock()
	old := s.get()
	rows := make([]driver.Setting, 0, len(old.queues)+len(old.types)+1)
	for _, r := range old.queues {
		if set.Kind != driver.SettingQueue || r.Name != set.Name {
			rows = append(rows, r)
		}
	}
	for _, r := range old.types {
		if set.Kind != driver.SettingType || r.Name != set.Name {
			rows = append(rows, r)
		}
	}
	s.snap.Store(newSnapshot(append(rows, set)))
	s.mu.Unlock()
	e.WakeQueue("")
}

// queueLimit is how many of queue's tasks may run at once on this node now:
// the configured MaxWorkers, lowered by a concurrency setting (which caps
// the whole cluster, so this node too), 0 when the queue is paused.
func (e *Engine) queueLimit(queue string, configured int) int {
	s, ok := e.settings.get().queues[queue]
	switch {
	case !ok:
		return configured
	case s.Paused:
		return 0
	case s.Concurrency > 0:
		return min(configured, s.Concurrency)
	}
	return configured
}

// claimFilter returns the task types a claim may take as it is, and the
// limited types (a cluster-wide concurrency or a rate) it must claim one at
// a time through Driver.ClaimLimited, each with the room its concurrency
// leaves on this node (the cluster's count can only be higher), or n.
// Paused types and limited types whose attempts in this process, running or
// being stored, reach their concurrency are in neither. A nil types means
// no unlimited type is left to claim.
func (e *Engine) claimFilter(n int) (types []string, limited []limitedType) {
	if len(e.handled) == 0 {
		return nil, nil
	}
	snap := e.settings.get()
	if len(snap.pausedTypes) == 0 && len(snap.limited) == 0 {
		return e.handled, nil
	}
	skip := make(map[string]bool, len(snap.pausedTypes)+len(snap.limited))
	for _, t := range snap.pausedTypes {
		skip[t] = true
	}
	if len(snap.limited) > 0 {
		e.mu.Lock()
		running := map[string]int{}
		for _, ex := range e.running {
			running[ex.row.Type]++
		}
		e.mu.Unlock()
		for _, s := range snap.limited {
			skip[s.Name] = true
			if !slices.Contains(e.handled, s.Name) {
				continue
			}
			room := n
			if s.Concurrency > 0 {
				room = min(n, s.Concurrency-running[s.Name])
			}
			if room > 0 {
				limited = append(limited, limitedType{name: s.Name, room: room})
			}
		}
	}
	types = make([]string, 0, len(e.handled))
	for _, t := range e.handled {
		if !skip[t] {
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		types = nil
	}
	return types, limited
}

// limitedType is a limited task type a claim may take up to room of.
type limitedType struct {
	name string
	room int
}

// queueLimited reports whether queue has a cluster-wide concurrency or a
// rate: every claim of it goes through Driver.ClaimLimited.
func (e *Engine) queueLimited(queue string) bool {
	s, ok := e.settings.get().queues[queue]
	return ok && !s.Paused && (s.Concurrency > 0 || s.Rate > 0)
}

// typeCapped reports whether a finished task of taskType in queue frees
// room under a cluster-wide concurrency that other nodes' workers, and
// this one's, may be waiting for.
func (e *Engine) typeCapped(taskType, queue string) bool {
	snap := e.settings.get()
	s, ok := snap.types[taskType]
	q, qok := snap.queues[queue]
	return (ok && !s.Paused && s.Concurrency > 0) || (qok && !q.Paused && q.Concurrency > 0)
}

// applyTypeSettings overrides a claimed row's timeout and max attempts with
// its type's runtime settings.
func (e *Engine) applyTypeSettings(row *driver.TaskRow) {
	s, ok := e.settings.get().types[row.Type]
	if !ok {
		return
	}
	if s.Timeout > 0 {
		row.Timeout = s.Timeout
	}
	if s.MaxAttempts > 0 {
		row.MaxAttempts = s.MaxAttempts
	}
}
