// Package declare keeps a client's task type declarations (keel_types):
// it stores the defaults of the types the client registers, once, and
// reads the stored defaults of the types it enqueues without declaring
// them, through a cache.
//
// The precedence on enqueue is: the call's options, the client's own
// registration of the type, the stored declaration, the client's Config
// defaults. This package serves the first two writers and the third
// reader; the root applies the precedence.
package declare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Store is what Declarations needs of a driver.
type Store interface {
	ListTypes(ctx context.Context, names []string) ([]driver.TypeDefaults, error)
	DeclareTypes(ctx context.Context, params driver.DeclareTypesParams) error
}

// Config wires Declarations.
type Config struct {
	Store Store
	// Types are the client's own declarations, one per name: the types
	// it registers with any default.
	Types []driver.TypeDefaults
	// MaxAge is how long a stored declaration read into the cache is used
	// before it is read again (keel's Config.SettingsInterval).
	MaxAge time.Duration
	// Now stamps the declarations written (keel's Config.Now); default
	// time.Now.
	Now func() time.Time
	// Clock measures the cache's age; default the wall clock. It is not
	// Now: a client whose Config.Now is set still reads again on time.
	Clock  service.Clock
	Logger *slog.Logger
}

// Declarations writes a client's own type defaults and caches the stored
// ones of the types it enqueues without declaring them.
type Declarations struct {
	cfg  Config
	clk  service.Clock
	own  []driver.TypeDefaults // sorted by name
	done atomic.Bool           // own are stored
	mu   sync.Mutex            // serializes the writers of own
	// async is set while a DeclareLater runs in the background.
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

// New returns the Declarations of cfg.Types, none stored yet.
func New(cfg Config) *Declarations {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Declarations{cfg: cfg, clk: service.Or(cfg.Clock, nil), own: slices.Clone(cfg.Types),
		warned: map[string]bool{}, cache: map[string]storedType{}}
	slices.SortFunc(d.own, func(a, b driver.TypeDefaults) int { return strings.Compare(a.Name, b.Name) })
	d.done.Store(len(d.own) == 0)
	return d
}

// Declare stores the client's type defaults unless that is done. A stored
// declaration that differs from the client's is logged once, then
// replaced: the last writer wins. An error is returned and the next call
// tries again.
func (d *Declarations) Declare(ctx context.Context) error {
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
	stored, err := d.cfg.Store.ListTypes(ctx, names)
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
			d.cfg.Logger.Warn("keel: task type declared with other defaults elsewhere; this client's replace them",
				"type", t.Name, "stored", describe(s), "ours", describe(t), "stored_at", s.UpdatedAt)
		}
		write = append(write, t)
	}
	if len(write) > 0 {
		if err := d.cfg.Store.DeclareTypes(ctx, driver.DeclareTypesParams{Types: write, Now: d.cfg.Now()}); err != nil {
			return fmt.Errorf("keel: store declared task types: %w", ctxOr(ctx, err))
		}
	}
	d.done.Store(true)
	return nil
}

// DeclareLater runs Declare in the background, for at most a minute,
// unless it is done or already running: for an enqueue in the caller's
// transaction, which may hold the database (SQLite has one writer) until
// it commits. A failure is logged; the next Declare or DeclareLater tries
// again.
func (d *Declarations) DeclareLater(ctx context.Context) {
	if d.done.Load() || !d.async.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer d.async.Store(false)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := d.Declare(dctx); err != nil {
			d.cfg.Logger.Warn("keel: storing declared task types failed; retried on the next enqueue", "error", err)
		}
	}()
}

// Stored returns the stored declarations of types (nil where none is
// stored), read through the cache. A type never read is read at once
// (one query for all of them, one reader at a time); an entry older than
// MaxAge is used as it is while one caller reads it again, so the
// enqueues of known types stay one insert.
func (d *Declarations) Stored(ctx context.Context, types []string) (map[string]*driver.TypeDefaults, error) {
	if len(types) == 0 {
		return nil, nil
	}
	out, stale, missing := d.lookup(types)
	if len(missing) > 0 {
		d.readMu.Lock()
		defer d.readMu.Unlock()
		// Another caller may have read them meanwhile.
		if out, stale, missing = d.lookup(types); len(missing) > 0 {
			if err := d.read(ctx, append(missing, stale...), out); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if len(stale) > 0 && d.readMu.TryLock() {
		defer d.readMu.Unlock()
		d.read(ctx, stale, out) //nolint:errcheck // the cached entries stay in out and are read again next time
	}
	return out, nil
}

// lookup returns the cached declarations of types (stale ones included)
// and the types whose entry is older than MaxAge or missing.
func (d *Declarations) lookup(types []string) (out map[string]*driver.TypeDefaults, stale, missing []string) {
	now := d.clk.Now()
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
		case now.Sub(e.readAt) >= d.cfg.MaxAge:
			stale = append(stale, t)
		}
		out[t] = e.row
	}
	return out, stale, missing
}

// read reads the declarations of names into the cache and out.
func (d *Declarations) read(ctx context.Context, names []string, out map[string]*driver.TypeDefaults) error {
	now := d.clk.Now()
	rows, err := d.cfg.Store.ListTypes(ctx, names)
	if err != nil {
		return fmt.Errorf("keel: read declared defaults of task types: %w", ctxOr(ctx, err))
	}
	found := make(map[string]*driver.TypeDefaults, len(rows))
	for i := range rows {
		found[rows[i].Name] = &rows[i]
	}
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

// describe renders a declaration for a log line.
func describe(t driver.TypeDefaults) string {
	p := "unset"
	if t.Priority != nil {
		p = fmt.Sprint(*t.Priority)
	}
	return fmt.Sprintf("queue=%q priority=%s max_attempts=%d timeout=%v backoff=%v..%v",
		t.Queue, p, t.MaxAttempts, t.Timeout, t.BackoffBase, t.BackoffMax)
}
