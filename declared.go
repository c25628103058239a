package keel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
)

// Declared type defaults (keel_types). A client writes the defaults of
// the types it registers with any default (Handle or Declare options) once,
// before its first enqueue or at Start, so that every client enqueuing
// such a type applies them: an enqueue-only client (Config.Types,
// Config.AnyType) reads them through a small cache. The precedence on
// Enqueue is: the call's options, this client's own registration of the
// type, the stored declaration, the Config defaults.

// declarations writes this client's own type defaults and caches the
// stored ones of the types it enqueues without declaring them.
type declarations struct {
	own  []driver.TypeDefaults // this client's registrations with defaults, by name
	done atomic.Bool           // own are stored
	mu   sync.Mutex            // serializes the writers of own
	// async is set while an EnqueueTx's declaration runs in the background.
	async  atomic.Bool
	warned map[string]bool // types whose differing stored row was logged

	cacheMu sync.Mutex
	cache   map[string]storedType
	readMu  sync.Mutex // one reader of stored declarations at a time
}

// storedType is one type's stored declaration as last read (row nil: none).
type storedType struct {
	row    *driver.TypeDefaults
	readAt time.Time
}

func newDeclarations(types map[string]options) *declarations {
	d := &declarations{warned: map[string]bool{}, cache: map[string]storedType{}}
	for name, o := range types {
		if o.declared() {
			d.own = append(d.own, o.typeDefaults(name))
		}
	}
	slices.SortFunc(d.own, func(a, b driver.TypeDefaults) int { return compareStrings(a.Name, b.Name) })
	d.done.Store(len(d.own) == 0)
	return d
}

// declare stores this client's type defaults unless that is done. A
// stored declaration that differs from this client's is logged once, then
// replaced: the last writer wins. An error is returned and the next call
// tries again.
func (c *Client) declare(ctx context.Context) error {
	d := c.decl
	if d.done.Load() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done.Load() {
		return nil
	}
	names := make([]string, len(d.own))
	for i, t := range d.own {
		names[i] = t.Name
	}
	stored, err := c.drv.ListTypes(ctx, names)
	if err != nil {
		return fmt.Errorf("keel: read declared task types: %w", ctxOr(ctx, err))
	}
	byName := make(map[string]driver.TypeDefaults, len(stored))
	for _, s := range stored {
		byName[s.Name] = s
	}
	var write []driver.TypeDefaults
	for _, t := range d.own {
		s, ok := byName[t.Name]
		if ok && s.Equal(t) {
			continue
		}
		if ok && !d.warned[t.Name] {
			d.warned[t.Name] = true
			c.cfg.Logger.Warn("keel: task type declared with other defaults elsewhere; this client's replace them",
				"type", t.Name, "stored", describeDefaults(s), "ours", describeDefaults(t), "stored_at", s.UpdatedAt)
		}
		write = append(write, t)
	}
	if len(write) > 0 {
		if err := c.drv.DeclareTypes(ctx, driver.DeclareTypesParams{Types: write, Now: c.cfg.Now()}); err != nil {
			return fmt.Errorf("keel: store declared task types: %w", ctxOr(ctx, err))
		}
	}
	d.done.Store(true)
	return nil
}

// declareLater stores this client's type defaults in the background: for
// EnqueueTx, whose caller's open transaction may hold the database (SQLite
// has one writer) until it commits. A failure is logged; the next enqueue
// or Start tries again.
func (c *Client) declareLater(ctx context.Context) {
	d := c.decl
	if d.done.Load() || !d.async.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer d.async.Store(false)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.declare(dctx); err != nil {
			c.cfg.Logger.Warn("keel: storing declared task types failed; retried on the next enqueue", "error", err)
		}
	}()
}

// storedDefaults returns the stored declarations of types (nil where none
// is stored), read through the cache. A type never read is read at once
// (one query for all of them, one reader at a time); an entry older than
// Config.SettingsInterval is used as it is while one caller reads it
// again, so the enqueues of known types stay one insert.
func (c *Client) storedDefaults(ctx context.Context, types []string) (map[string]*driver.TypeDefaults, error) {
	if len(types) == 0 {
		return nil, nil
	}
	d := c.decl
	out, stale, missing := d.lookup(types, c.cfg.SettingsInterval)
	if len(missing) > 0 {
		d.readMu.Lock()
		defer d.readMu.Unlock()
		// Another caller may have read them meanwhile.
		if out, stale, missing = d.lookup(types, c.cfg.SettingsInterval); len(missing) > 0 {
			if err := c.readStored(ctx, append(missing, stale...), out); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if len(stale) > 0 && d.readMu.TryLock() {
		defer d.readMu.Unlock()
		c.readStored(ctx, stale, out) //nolint:errcheck // the cached entries stay in out and are read again next time
	}
	return out, nil
}

// lookup returns the cached declarations of types (stale ones included)
// and the types whose entry is older than maxAge or missing.
func (d *declarations) lookup(types []string, maxAge time.Duration) (out map[string]*driver.TypeDefaults, stale, missing []string) {
	now := time.Now() // real time, not Config.Now: this is the cache's age
	out = make(map[string]*driver.TypeDefaults, len(types))
	d.cacheMu.Lock()
	defer d.cacheMu.Unlock()
	for _, t := range types {
		if _, seen := out[t]; seen || slices.Contains(missing, t) {
			continue
		}
		e, ok := d.cache[t]
		switch {
		case !ok:
			missing = append(missing, t)
			continue
		case now.Sub(e.readAt) >= maxAge:
			stale = append(stale, t)
		}
		out[t] = e.row
	}
	return out, stale, missing
}

// readStored reads the declarations of names into the cache and out.
func (c *Client) readStored(ctx context.Context, names []string, out map[string]*driver.TypeDefaults) error {
	now := time.Now()
	rows, err := c.drv.ListTypes(ctx, names)
	if err != nil {
		return fmt.Errorf("keel: read declared defaults of task types: %w", ctxOr(ctx, err))
	}
	found := make(map[string]*driver.TypeDefaults, len(rows))
	for i := range rows {
		found[rows[i].Name] = &rows[i]
	}
	d := c.decl
	d.cacheMu.Lock()
	defer d.cacheMu.Unlock()
	for _, t := range names {
		out[t] = found[t]
		d.cache[t] = storedType{row: found[t], readAt: now}
	}
	return nil
}

// ctxOr is err, or when ctx ended, ctx's error with err's text: a driver
// cut off by the deadline does not always say so (a dial timeout), and the
// caller tests for context.DeadlineExceeded.
func ctxOr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded // the deadline passed; ctx may not have noticed yet
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %v", cerr, err)
	}
	return err
}

// describeDefaults renders a declaration for a log line.
func describeDefaults(t driver.TypeDefaults) string {
	p := "unset"
	if t.Priority != nil {
		p = fmt.Sprint(*t.Priority)
	}
	return fmt.Sprintf("queue=%q priority=%s max_attempts=%d timeout=%v backoff=%v..%v",
		t.Queue, p, t.MaxAttempts, t.Timeout, t.BackoffBase, t.BackoffMax)
}
