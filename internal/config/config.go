// Package config holds the defaults and the rules of keel.Config: Fields
// points at a Config's settings, Default fills the unset ones and Check
// refuses bad values, with the errors keel.NewClient returns.
package config

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/kerr"
)

// The least retention keel.Config accepts: keel.MinRetainSucceeded and
// keel.MinRetainDead, which a test holds equal to these.
const (
	MinRetainSucceeded = time.Minute
	MinRetainDead      = 7 * 24 * time.Hour
)

// Fields points at the settings of a keel.Config, each named as there;
// AlertsInterval and AlertsRetryMax are Alerts.Interval and
// Alerts.RetryMax.
type Fields struct {
	Node, Version  *string
	Logger         **slog.Logger
	Now            *func() time.Time
	TracerProvider *trace.TracerProvider

	MaxAttempts, MaxSnoozes, ArchiveBatch, ClaimBatch, MaxRunawayHandlers, MaxPayloadBytes *int
	BackoffJitter                                                                          *float64

	Timeout, BackoffBase, BackoffMax, LeaseTTL, HeartbeatInterval, PollInterval *time.Duration
	RescueInterval, ReconcileInterval, MaintainInterval, HistoryRetention       *time.Duration
	RetainSucceeded, RetainDead, DeleteArchivedAfter, ArchiveInterval           *time.Duration
	SettingsInterval, TimeoutGrace, AlertsInterval, AlertsRetryMax              *time.Duration
}

// Default sets every field left zero to its documented default; workers,
// the sum of the queues' MaxWorkers, is MaxRunawayHandlers' (at least 1).
func (f Fields) Default(workers int) {
	if *f.Node == "" {
		*f.Node = NodeName()
	}
	if *f.Version == "" {
		*f.Version = ModuleVersion()
	}
	if *f.Logger == nil {
		*f.Logger = slog.Default()
	}
	if *f.Now == nil {
		*f.Now = time.Now
	}
	if *f.TracerProvider == nil {
		*f.TracerProvider = otel.GetTracerProvider()
	}
	setDefault(f.MaxRunawayHandlers, max(workers, 1)) // no queues: nothing runs
	for _, d := range []struct {
		v   *int
		def int
	}{
		{f.MaxAttempts, 4}, {f.MaxSnoozes, 100}, {f.ArchiveBatch, 1000}, {f.ClaimBatch, 100},
		{f.MaxPayloadBytes, 1 << 20},
	} {
		setDefault(d.v, d.def)
	}
	setDefault(f.BackoffJitter, 0.2)
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{f.Timeout, 60 * time.Second}, {f.BackoffBase, 30 * time.Second}, {f.BackoffMax, time.Hour},
		{f.LeaseTTL, 30 * time.Second}, {f.HeartbeatInterval, 10 * time.Second}, {f.PollInterval, time.Second},
		{f.RescueInterval, 10 * time.Second}, {f.ReconcileInterval, 5 * time.Minute}, {f.MaintainInterval, time.Minute},
		{f.HistoryRetention, 8 * 24 * time.Hour}, {f.RetainSucceeded, 30 * 24 * time.Hour},
		{f.RetainDead, 30 * 24 * time.Hour}, {f.ArchiveInterval, time.Minute}, {f.SettingsInterval, 2 * time.Second},
		{f.TimeoutGrace, 5 * time.Second}, {f.AlertsInterval, 15 * time.Second}, {f.AlertsRetryMax, 5 * time.Minute},
	} {
		setDefault(d.v, d.def)
	}
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// NodeName is the default name of this process: hostname-pid-random.
func NodeName() string {
	host, _ := os.Hostname()
	var b [3]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ModuleVersion is keel's module version in this program's build
// information: the version of the github.com/keelq/keel dependency, or
// the main module's when the program is built from keel's own tree (a
// pseudo-version with the commit for go build in a checkout); "" when the
// build carries none (go run, go test).
func ModuleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return moduleVersion(bi)
}

func moduleVersion(bi *debug.BuildInfo) string {
	const path = "github.com/keelq/keel"
	if bi.Main.Path == path {
		if v := bi.Main.Version; v != "(devel)" {
			return v
		}
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// Queue is a keel.QueueConfig: MaxWorkers and Prefetch (NoPrefetch for
// none).
type Queue struct {
	MaxWorkers, Prefetch int
}

// QueueConfig is keel.QueueConfig, or Queue: the functions on a client's
// queues take its Config.Queues as they are.
type QueueConfig interface {
	~struct{ MaxWorkers, Prefetch int }
}

// DefaultQueues returns queues with each queue's unset MaxWorkers (10)
// and Prefetch (a quarter of MaxWorkers, rounded down) set, and the sum
// of their MaxWorkers.
func DefaultQueues[Q QueueConfig](queues map[string]Q) (map[string]Q, int) {
	out, workers := make(map[string]Q, len(queues)), 0
	for name, c := range queues {
		q := Queue(c)
		q.MaxWorkers = cmp.Or(q.MaxWorkers, 10)
		if q.Prefetch == 0 {
			q.Prefetch = max(q.MaxWorkers/4, 0)
		}
		out[name], workers = Q(q), workers+q.MaxWorkers
	}
	return out, workers
}

// NoPrefetch is keel.NoPrefetch; MaxPrefetch bounds a queue's prefetch,
// which is also at most PrefetchPerWorker times its workers.
const (
	NoPrefetch        = -1
	MaxPrefetch       = 1000
	PrefetchPerWorker = 4
)

// PrefetchBound is the largest prefetch a queue of workers may have.
func PrefetchBound(workers int) int { return min(MaxPrefetch, PrefetchPerWorker*workers) }

// Check refuses a Config whose settings (f, after Default) cannot run,
// naming the first bad field: queues and types first, then the
// durations' signs, then alerts, the alert settings' own check, then the
// settings' ranges.
func Check[Q QueueConfig](f Fields, queues map[string]Q, types []string, alerts func() error) error {
	invalid := kerr.Invalid
	for _, name := range slices.Sorted(maps.Keys(queues)) {
		q := Queue(queues[name])
		switch {
		case !driver.ValidName(name):
			return invalid("Config.Queues: invalid queue name %q", name)
		case name == enqueue.KeelQueue:
			return invalid("Config.Queues: queue %q is reserved for keel's own tasks (alert deliveries, the drill)", name)
		case q.MaxWorkers < 0:
			return invalid("Config.Queues[%q].MaxWorkers must be positive, got %d", name, q.MaxWorkers)
		case q.Prefetch < NoPrefetch || q.Prefetch > PrefetchBound(q.MaxWorkers):
			return invalid("Config.Queues[%q].Prefetch must be at most %d (%d×MaxWorkers, at most %d), or keel.NoPrefetch (%d) for none; got %d",
				name, PrefetchBound(q.MaxWorkers), PrefetchPerWorker, MaxPrefetch, NoPrefetch, q.Prefetch)
		}
	}
	for _, t := range types {
		if !driver.ValidName(t) {
			return invalid("Config.Types: invalid type name %q", t)
		}
		if enqueue.ReservedType(t) {
			return invalid("Config.Types: type names starting with %q are reserved for keel's own tasks, got %q", enqueue.KeelTypePrefix, t)
		}
	}
	for _, p := range []struct {
		name string
		d    time.Duration
	}{
		{"Timeout", *f.Timeout}, {"BackoffBase", *f.BackoffBase}, {"BackoffMax", *f.BackoffMax},
		{"LeaseTTL", *f.LeaseTTL}, {"HeartbeatInterval", *f.HeartbeatInterval}, {"PollInterval", *f.PollInterval},
		{"RescueInterval", *f.RescueInterval}, {"ReconcileInterval", *f.ReconcileInterval},
		{"MaintainInterval", *f.MaintainInterval}, {"HistoryRetention", *f.HistoryRetention},
		{"SettingsInterval", *f.SettingsInterval}, {"TimeoutGrace", *f.TimeoutGrace},
		{"RetainSucceeded", *f.RetainSucceeded}, {"RetainDead", *f.RetainDead},
		{"DeleteArchivedAfter", *f.DeleteArchivedAfter}, {"ArchiveInterval", *f.ArchiveInterval},
	} {
		if p.d < 0 {
			return invalid("Config.%s must be positive, got %v", p.name, p.d)
		}
	}
	if err := alerts(); err != nil {
		return err
	}
	return f.checkRanges()
}

// checkRanges refuses settings outside their range or at odds with
// another.
func (f Fields) checkRanges() error {
	invalid := kerr.Invalid
	if *f.HistoryRetention < time.Hour {
		// Stats and the ETA read the last hour.
		return invalid("Config.HistoryRetention must be at least 1h, got %v", *f.HistoryRetention)
	}
	switch {
	case *f.RetainSucceeded < MinRetainSucceeded:
		return invalid("Config.RetainSucceeded must be at least %v, got %v", MinRetainSucceeded, *f.RetainSucceeded)
	case *f.RetainDead < MinRetainDead:
		// Seed 000 §3.2: dead letters are kept at least a week.
		return invalid("Config.RetainDead must be at least %v (7 days: dead letters are kept at least a week), got %v",
			MinRetainDead, *f.RetainDead)
	case *f.ArchiveBatch < 1 || *f.ArchiveBatch > driver.MaxArchiveLimit:
		return invalid("Config.ArchiveBatch must be in 1..%d, got %d", driver.MaxArchiveLimit, *f.ArchiveBatch)
	case *f.MaxAttempts < 1:
		return invalid("Config.MaxAttempts must be at least 1, got %d", *f.MaxAttempts)
	case *f.MaxAttempts > 1000: // the limit of the MaxAttempts option too
		return invalid("Config.MaxAttempts must be at most 1000, got %d", *f.MaxAttempts)
	case *f.Timeout < time.Millisecond: // stored in milliseconds: less would be no time at all
		return invalid("Config.Timeout must be at least 1ms, got %v", *f.Timeout)
	case *f.MaxSnoozes < 1 || *f.MaxSnoozes > enqueue.MaxSnoozesLimit:
		return invalid("Config.MaxSnoozes must be in 1..%d, got %d", enqueue.MaxSnoozesLimit, *f.MaxSnoozes)
	case *f.BackoffJitter >= 1:
		return invalid("Config.BackoffJitter must be below 1, got %v", *f.BackoffJitter)
	case *f.BackoffMax < *f.BackoffBase:
		return invalid("Config.BackoffMax (%v) must not be below BackoffBase (%v)", *f.BackoffMax, *f.BackoffBase)
	case *f.HeartbeatInterval >= *f.LeaseTTL:
		return invalid("Config.HeartbeatInterval (%v) must be shorter than LeaseTTL (%v)", *f.HeartbeatInterval, *f.LeaseTTL)
	case *f.ClaimBatch < 1 || *f.ClaimBatch > 1000:
		return invalid("Config.ClaimBatch must be in 1..1000, got %d", *f.ClaimBatch)
	case *f.MaxRunawayHandlers < 1:
		return invalid("Config.MaxRunawayHandlers must be positive, got %d", *f.MaxRunawayHandlers)
	case *f.MaxPayloadBytes < 1:
		return invalid("Config.MaxPayloadBytes must be positive, got %d", *f.MaxPayloadBytes)
	}
	return nil
}
