package keel

import (
	"context"
	"reflect"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// settingsSnapshot is the runtime settings (keel_settings) as last read.
type settingsSnapshot struct {
	queues      map[string]driver.Setting
	types       map[string]driver.Setting
	pausedTypes []string
	capped      []driver.Setting // unpaused types with a concurrency cap
}

func newSnapshot(rows []driver.Setting) *settingsSnapshot {
	s := &settingsSnapshot{queues: map[string]driver.Setting{}, types: map[string]driver.Setting{}}
	for _, r := range rows {
		switch r.Kind {
		case driver.SettingQueue:
			s.queues[r.Name] = r
		case driver.SettingType:
			s.types[r.Name] = r
			if r.Paused {
				s.pausedTypes = append(s.pausedTypes, r.Name)
			} else if r.Concurrency > 0 {
				s.capped = append(s.capped, r)
			}
		}
	}
	return s
}

func (c *Client) snapshot() *settingsSnapshot {
	if s := c.settings.Load(); s != nil {
		return s
	}
	return &settingsSnapshot{}
}

// queueLimit is how many of queue's tasks may run at once on this node now:
// the configured MaxWorkers, lowered by a concurrency setting, 0 when the
// queue is paused.
func (c *Client) queueLimit(queue string, configured int) int {
	s, ok := c.snapshot().queues[queue]
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

// claimFilter returns the task types a claim of up to n tasks must skip
// (paused types, and types whose attempts in this process, running or
// being stored, reach their concurrency cap) and how many tasks it may
// take: no more than the smallest room left under a type's cap, so one
// batch cannot overshoot it.
func (c *Client) claimFilter(n int) ([]string, int) {
	snap := c.snapshot()
	if len(snap.capped) == 0 {
		return snap.pausedTypes, n
	}
	exclude := slices.Clone(snap.pausedTypes)
	c.mu.Lock()
	running := map[string]int{}
	for _, ex := range c.running {
		running[ex.row.Type]++
	}
	c.mu.Unlock()
	for _, s := range snap.capped {
		room := s.Concurrency - running[s.Name]
		if room <= 0 {
			exclude = append(exclude, s.Name)
			continue
		}
		n = min(n, room)
	}
	return exclude, n
}

// typeCapped reports whether taskType has a concurrency cap.
func (c *Client) typeCapped(taskType string) bool {
	s, ok := c.snapshot().types[taskType]
	return ok && !s.Paused && s.Concurrency > 0
}

// applyTypeSettings overrides a claimed row's timeout and max attempts with
// its type's runtime settings.
func (c *Client) applyTypeSettings(row *driver.TaskRow) {
	s, ok := c.snapshot().types[row.Type]
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

// applySetting puts one changed setting into the snapshot at once (the
// refresh loop brings the others' changes) and wakes the queues it may
// have unblocked.
func (c *Client) applySetting(s driver.Setting) {
	c.settingsMu.Lock()
	old := c.snapshot()
	rows := make([]driver.Setting, 0, len(old.queues)+len(old.types)+1)
	for _, r := range old.queues {
		if s.Kind != driver.SettingQueue || r.Name != s.Name {
			rows = append(rows, r)
		}
	}
	for _, r := range old.types {
		if s.Kind != driver.SettingType || r.Name != s.Name {
			rows = append(rows, r)
		}
	}
	c.settings.Store(newSnapshot(append(rows, s)))
	c.settingsMu.Unlock()
	c.wakeQueue("")
}

// startSettingsRefresh reads keel_settings every SettingsInterval so that a
// change made through any node applies here too.
func (c *Client) startSettingsRefresh(ctx context.Context) *service.Loop {
	// Start calls this holding c.mu: the first load must not wake queues
	// (they have not started yet; wakeQueue takes c.mu).
	load := func(ctx context.Context, wake bool) {
		lctx, cancel := context.WithTimeout(ctx, max(c.cfg.SettingsInterval, time.Second))
		defer cancel()
		rows, err := c.drv.ListSettings(lctx)
		if err != nil {
			if ctx.Err() == nil {
				c.cfg.Logger.Warn("keel: reading runtime settings failed", "error", err)
			}
			return
		}
		next := newSnapshot(rows)
		c.settingsMu.Lock()
		changed := !reflect.DeepEqual(c.snapshot().queues, next.queues) || !reflect.DeepEqual(c.snapshot().types, next.types)
		c.settings.Store(next)
		c.settingsMu.Unlock()
		if wake && changed {
			c.wakeQueue("") // a resumed queue or a raised limit frees slots
		}
	}
	load(ctx, false) // workers start with the stored settings
	return service.Start(ctx, func(ctx context.Context) {
		service.Every(ctx, c.cfg.SettingsInterval, func(ctx context.Context) { load(ctx, true) })
	})
}
