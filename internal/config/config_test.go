package config

import (
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/kerr"
)

// settings are the values of one keel.Config that Fields points at.
type settings struct {
	logger         *slog.Logger
	now            func() time.Time
	tracerProvider trace.TracerProvider

	node, version                                                                          string
	maxAttempts, maxSnoozes, archiveBatch, claimBatch, maxRunawayHandlers, maxPayloadBytes int
	backoffJitter                                                                          float64
	timeout, backoffBase, backoffMax, leaseTTL, heartbeat, poll, rescue, reconcile         time.Duration
	maintain, history, retainSucceeded, retainDead, deleteArchived, archiveInterval        time.Duration
	settingsInterval, timeoutGrace, alertsInterval, alertsRetryMax                         time.Duration
}

func (s *settings) fields() Fields {
	return Fields{Node: &s.node, Version: &s.version, Logger: &s.logger, Now: &s.now, TracerProvider: &s.tracerProvider,
		MaxAttempts: &s.maxAttempts, MaxSnoozes: &s.maxSnoozes, ArchiveBatch: &s.archiveBatch, ClaimBatch: &s.claimBatch,
		MaxRunawayHandlers: &s.maxRunawayHandlers, MaxPayloadBytes: &s.maxPayloadBytes, BackoffJitter: &s.backoffJitter,
		Timeout: &s.timeout, BackoffBase: &s.backoffBase, BackoffMax: &s.backoffMax, LeaseTTL: &s.leaseTTL,
		HeartbeatInterval: &s.heartbeat, PollInterval: &s.poll, RescueInterval: &s.rescue, ReconcileInterval: &s.reconcile,
		MaintainInterval: &s.maintain, HistoryRetention: &s.history, RetainSucceeded: &s.retainSucceeded,
		RetainDead: &s.retainDead, DeleteArchivedAfter: &s.deleteArchived, ArchiveInterval: &s.archiveInterval,
		SettingsInterval: &s.settingsInterval, TimeoutGrace: &s.timeoutGrace,
		AlertsInterval: &s.alertsInterval, AlertsRetryMax: &s.alertsRetryMax}
}

// defaulted returns settings with every default, for queues of 10
// workers in all.
func defaulted() *settings {
	s := &settings{}
	s.fields().Default(10)
	return s
}

func TestDefault(t *testing.T) {
	s := defaulted()
	if s.logger != slog.Default() || s.now == nil || s.tracerProvider != otel.GetTracerProvider() {
		t.Fatalf("logger %v, clock set %v, tracer provider %v", s.logger, s.now != nil, s.tracerProvider)
	}
	s.now = nil
	want := settings{logger: s.logger, tracerProvider: s.tracerProvider, node: s.node, maxAttempts: 4, maxSnoozes: 100, archiveBatch: 1000, claimBatch: 100,
		maxRunawayHandlers: 10, maxPayloadBytes: 1 << 20, backoffJitter: 0.2, timeout: time.Minute,
		backoffBase: 30 * time.Second, backoffMax: time.Hour, leaseTTL: 30 * time.Second, heartbeat: 10 * time.Second,
		poll: time.Second, rescue: 10 * time.Second, reconcile: 5 * time.Minute, maintain: time.Minute,
		history: 192 * time.Hour, retainSucceeded: 720 * time.Hour, retainDead: 720 * time.Hour,
		archiveInterval: time.Minute, settingsInterval: 2 * time.Second, timeoutGrace: 5 * time.Second,
		alertsInterval: 15 * time.Second, alertsRetryMax: 5 * time.Minute}
	if !reflect.DeepEqual(*s, want) {
		t.Fatalf("defaults\n got %+v\nwant %+v", *s, want)
	}
	if strings.Count(s.node, "-") < 2 {
		t.Fatalf("node %q is not hostname-pid-random", s.node)
	}
	logger := slog.New(slog.DiscardHandler)
	set := &settings{logger: logger, node: "n1", version: "v1", maxAttempts: 9, maxRunawayHandlers: 3, backoffJitter: -1,
		timeout: time.Second, deleteArchived: time.Hour}
	set.fields().Default(50)
	if set.logger != logger || set.node != "n1" || set.version != "v1" || set.maxAttempts != 9 || set.maxRunawayHandlers != 3 ||
		set.backoffJitter != -1 || set.timeout != time.Second || set.deleteArchived != time.Hour {
		t.Fatalf("Default changed a set value: %+v", *set)
	}
	none := &settings{}
	none.fields().Default(0)
	if none.maxRunawayHandlers != 1 {
		t.Fatalf("no queues: MaxRunawayHandlers %d, want 1", none.maxRunawayHandlers)
	}
}

func TestCheck(t *testing.T) {
	noAlerts := func() error { return nil }
	for _, c := range []struct {
		name   string
		mod    func(*settings)
		queues map[string]Queue
		types  []string
		want   string
	}{
		{name: "defaults"},
		{name: "jitter off", mod: func(s *settings) { s.backoffJitter = -1 }},
		{name: "least retention", mod: func(s *settings) { s.retainSucceeded, s.retainDead = MinRetainSucceeded, MinRetainDead }},
		{name: "bad queue", queues: map[string]Queue{"bad queue": {MaxWorkers: 1}}, want: `Config.Queues: invalid queue name "bad queue"`},
		{name: "keel queue", queues: map[string]Queue{"keel": {MaxWorkers: 1}},
			want: `Config.Queues: queue "keel" is reserved for keel's own tasks (alert deliveries, the drill)`},
		{name: "workers", queues: map[string]Queue{"q": {MaxWorkers: -1}}, want: `Config.Queues["q"].MaxWorkers must be positive, got -1`},
		{name: "prefetch off", queues: map[string]Queue{"q": {MaxWorkers: 1, Prefetch: NoPrefetch}}},
		{name: "prefetch bound", queues: map[string]Queue{"q": {MaxWorkers: 2, Prefetch: 8}, "r": {MaxWorkers: 1000, Prefetch: 1000}}},
		{name: "prefetch negative", queues: map[string]Queue{"q": {MaxWorkers: 10, Prefetch: -2}},
			want: `Config.Queues["q"].Prefetch must be at most 40 (4×MaxWorkers, at most 1000), or keel.NoPrefetch (-1) for none; got -2`},
		{name: "prefetch per worker", queues: map[string]Queue{"q": {MaxWorkers: 2, Prefetch: 9}},
			want: `Config.Queues["q"].Prefetch must be at most 8 (4×MaxWorkers, at most 1000), or keel.NoPrefetch (-1) for none; got 9`},
		{name: "prefetch most", queues: map[string]Queue{"q": {MaxWorkers: 1000, Prefetch: 1001}},
			want: `Config.Queues["q"].Prefetch must be at most 1000 (4×MaxWorkers, at most 1000), or keel.NoPrefetch (-1) for none; got 1001`},
		{name: "bad type", types: []string{"ok", "not ok"}, want: `Config.Types: invalid type name "not ok"`},
		{name: "keel type", types: []string{"keel.x"},
			want: `Config.Types: type names starting with "keel." are reserved for keel's own tasks, got "keel.x"`},
		{name: "names first", types: []string{"not ok"}, mod: func(s *settings) { s.timeout = -1 },
			want: `Config.Types: invalid type name "not ok"`},
		{name: "negative", mod: func(s *settings) { s.deleteArchived = -time.Hour }, want: "Config.DeleteArchivedAfter must be positive, got -1h0m0s"},
		{name: "negative first", mod: func(s *settings) { s.history, s.poll = -time.Hour, -time.Second },
			want: "Config.PollInterval must be positive, got -1s"},
		{name: "history", mod: func(s *settings) { s.history = 59 * time.Minute }, want: "Config.HistoryRetention must be at least 1h, got 59m0s"},
		{name: "succeeded", mod: func(s *settings) { s.retainSucceeded = 59 * time.Second },
			want: "Config.RetainSucceeded must be at least 1m0s, got 59s"},
		{name: "dead", mod: func(s *settings) { s.retainDead = 24 * time.Hour },
			want: "Config.RetainDead must be at least 168h0m0s (7 days: dead letters are kept at least a week), got 24h0m0s"},
		{name: "archive batch", mod: func(s *settings) { s.archiveBatch = 10001 }, want: "Config.ArchiveBatch must be in 1..10000, got 10001"},
		{name: "attempts", mod: func(s *settings) { s.maxAttempts = -1 }, want: "Config.MaxAttempts must be at least 1, got -1"},
		{name: "attempts max", mod: func(s *settings) { s.maxAttempts = 1001 }, want: "Config.MaxAttempts must be at most 1000, got 1001"},
		{name: "timeout", mod: func(s *settings) { s.timeout = time.Microsecond }, want: "Config.Timeout must be at least 1ms, got 1µs"},
		{name: "snoozes", mod: func(s *settings) { s.maxSnoozes = 1_000_001 }, want: "Config.MaxSnoozes must be in 1..1000000, got 1000001"},
		{name: "jitter", mod: func(s *settings) { s.backoffJitter = 1 }, want: "Config.BackoffJitter must be below 1, got 1"},
		{name: "backoff", mod: func(s *settings) { s.backoffBase, s.backoffMax = time.Minute, time.Second },
			want: "Config.BackoffMax (1s) must not be below BackoffBase (1m0s)"},
		{name: "heartbeat", mod: func(s *settings) { s.leaseTTL = 10 * time.Second },
			want: "Config.HeartbeatInterval (10s) must be shorter than LeaseTTL (10s)"},
		{name: "claim", mod: func(s *settings) { s.claimBatch = 0 }, want: "Config.ClaimBatch must be in 1..1000, got 0"},
		{name: "runaway", mod: func(s *settings) { s.maxRunawayHandlers = -1 }, want: "Config.MaxRunawayHandlers must be positive, got -1"},
		{name: "payload", mod: func(s *settings) { s.maxPayloadBytes = -1 }, want: "Config.MaxPayloadBytes must be positive, got -1"},
		{name: "first range", mod: func(s *settings) { s.maxPayloadBytes, s.maxAttempts = -1, 0 },
			want: "Config.MaxAttempts must be at least 1, got 0"},
	} {
		s := defaulted()
		if c.mod != nil {
			c.mod(s)
		}
		err := Check(s.fields(), c.queues, c.types, noAlerts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+c.want):
			t.Errorf("%s: %v, want ErrInvalid: %s", c.name, err, c.want)
		}
	}
}

// TestCheckAlertsOrder: the alert settings are checked after the
// durations' signs and before the ranges.
func TestCheckAlertsOrder(t *testing.T) {
	bad := errors.New("alerts")
	s := defaulted()
	s.claimBatch = 0
	if err := Check[Queue](s.fields(), nil, nil, func() error { return bad }); err != bad {
		t.Fatalf("ranges before alerts: %v", err)
	}
	s.poll = -1
	if err := Check[Queue](s.fields(), nil, nil, func() error { return bad }); err == bad {
		t.Fatalf("alerts before signs: %v", err)
	}
}

func TestModuleVersion(t *testing.T) {
	const path = "github.com/keelq/keel"
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"own tree", debug.BuildInfo{Main: debug.Module{Path: path, Version: "v0.0.0-2026-abc"}}, "v0.0.0-2026-abc"},
		{"own tree, devel", debug.BuildInfo{Main: debug.Module{Path: path, Version: "(devel)"}}, ""},
		{"dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: "other", Version: "v9"}, {Path: path, Version: "v1.2.3"}}}, "v1.2.3"},
		{"replaced", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: path, Version: "v1.2.3", Replace: &debug.Module{Path: "../keel", Version: "v1.2.4"}}}}, "v1.2.4"},
		{"replaced by a directory", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: path, Version: "v1.2.3", Replace: &debug.Module{Path: "../keel"}}}}, "v1.2.3"},
		{"absent", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, ""},
	} {
		if got := moduleVersion(&c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestDefaultQueues: each queue's unset workers and prefetch get their
// defaults; set ones, and NoPrefetch, stay.
func TestDefaultQueues(t *testing.T) {
	got, workers := DefaultQueues(map[string]Queue{"a": {}, "b": {MaxWorkers: 3}, "c": {MaxWorkers: 40, Prefetch: NoPrefetch},
		"d": {MaxWorkers: 8, Prefetch: 30}})
	want := map[string]Queue{"a": {MaxWorkers: 10, Prefetch: 2}, "b": {MaxWorkers: 3}, "c": {MaxWorkers: 40, Prefetch: NoPrefetch},
		"d": {MaxWorkers: 8, Prefetch: 30}}
	if !maps.Equal(got, want) || workers != 61 {
		t.Fatalf("DefaultQueues: %v, %d workers; want %v, 61", got, workers, want)
	}
}

// TestEngine: the engine gets every setting it has and each queue's
// workers and prefetch (none for NoPrefetch).
func TestEngine(t *testing.T) {
	s := defaulted()
	s.deleteArchived = 48 * time.Hour
	cfg := Engine(s.fields(), map[string]Queue{"a": {MaxWorkers: 4, Prefetch: 1}, "b": {MaxWorkers: 2, Prefetch: NoPrefetch}})
	if cfg.Now == nil {
		t.Fatal("no clock")
	}
	cfg.Now = nil
	want := engine.Config{Node: s.node, Version: s.version, Logger: s.logger,
		Queues: map[string]int{"a": 4, "b": 2}, QueuePrefetch: map[string]int{"a": 1, "b": 0},
		Backoff:    backoff.Policy{Base: 30 * time.Second, Max: time.Hour, Jitter: 0.2},
		MaxSnoozes: 100, LeaseTTL: 30 * time.Second, HeartbeatInterval: 10 * time.Second, PollInterval: time.Second,
		RescueInterval: 10 * time.Second, ReconcileInterval: 5 * time.Minute, MaintainInterval: time.Minute, RetainSucceeded: 30 * 24 * time.Hour,
		RetainDead: 30 * 24 * time.Hour, DeleteArchivedAfter: 48 * time.Hour, ArchiveInterval: time.Minute, ArchiveBatch: 1000,
		HistoryRetention: 8 * 24 * time.Hour, SettingsInterval: 2 * time.Second, ClaimBatch: 100,
		TimeoutGrace: 5 * time.Second, MaxRunaway: 10}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("engine settings\n%+v\nwant\n%+v", cfg, want)
	}
}
