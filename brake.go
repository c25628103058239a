package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/brake"
	"github.com/keelq/keel/internal/conv"
)

// The automatic brake (seed 000 §3.1: after a timeout, retry, degrade,
// record). It judges the downstream through the tasks: each task gives at
// most two pieces of evidence, the failure of its first attempt (an error
// or a timeout: not a permanent error, a panic, an expired lease or a
// release) and its success. Every node judges the attempts it runs on an
// exact window of the last Window pieces; when the failed share reaches
// Threshold, the node opens the type's brake for the cluster. Its tasks
// are then not claimed (they wait, pending) for Cooldown, and an alert
// (rule brake_open) fires. Then the brake is half open: each node with a
// handler lets a trickle of probes through, due retries first, widening
// with each success; probes failing in a row with no success reopen it,
// and once fresh tasks succeed again and the failures are outweighed it
// closes (and the alert resolves). An operator
// can close it by hand (Client.CloseBrake, the API, keel brake close).
// keel's own types never brake. The judgement lives in internal/brake.

// The brake's defaults.
const (
	// DefaultBrakeWindow is how many pieces of a type's latest evidence
	// are judged.
	DefaultBrakeWindow = 20
	// DefaultBrakeThreshold is the failed share that opens the brake: a
	// type whose tasks all succeed in the end gives at most one failure per
	// success, so only a burst of fresh tasks ahead of their retries'
	// successes passes 50 %; 0.8 leaves that room.
	DefaultBrakeThreshold = 0.8
	// DefaultBrakeCooldown is how long an open brake waits before a probe.
	DefaultBrakeCooldown = 30 * time.Second
)

// Brake sets the type's automatic brake: it opens when, of the type's last
// window pieces of evidence (tasks' first failures and successes), the
// failed share reaches threshold, and stays open for cooldown before a
// trickle of probes runs. Zero arguments take the
// defaults (DefaultBrakeWindow 20, DefaultBrakeThreshold 0.8,
// DefaultBrakeCooldown 30s). Only meaningful on Handle and Declare; stored
// with the type's declared defaults, so the leader applies it whichever
// process it is. Default: the defaults.
func Brake(window int, threshold float64, cooldown time.Duration) Option {
	return func(o *options) {
		o.Brake = &driver.BrakeConfig{Window: window, Threshold: threshold, Cooldown: cooldown}
	}
}

// NoBrake turns the automatic brake off for the type. Only meaningful on
// Handle and Declare.
func NoBrake() Option {
	return func(o *options) { o.Brake = &driver.BrakeConfig{Window: -1} }
}

// RuleBrakeOpen is the alert rule that fires while a type's brake is open
// or half open, and resolves when it closes.
const RuleBrakeOpen = "brake_open"

// The states of a brake.
const (
	BrakeClosed   = driver.BrakeClosed
	BrakeOpen     = driver.BrakeOpen
	BrakeHalfOpen = driver.BrakeHalfOpen
)

// BrakeInfo is one type's brake as stored.
type BrakeInfo struct {
	Type string
	// State is closed, open (the type's tasks are not claimed until
	// Until) or half_open (a trickle of probe tasks runs).
	State driver.BrakeState
	// OpenedAt is when the brake last opened; Until when an open brake
	// lets a probe through.
	OpenedAt, Until time.Time
	// ProbeTaskID, ProbeNode and ProbeAt are no longer set: a half-open
	// brake's probes are a trickle on every node, not one task. Kept for
	// rows and clients of earlier versions.
	ProbeTaskID int64
	ProbeNode   string
	ProbeAt     time.Time
	// Ratio is the failed share of the window that opened the brake, and
	// Attempts the pieces of evidence in it.
	Ratio    float64
	Attempts int
	// Reason says why the brake last changed.
	Reason    string
	ClosedAt  time.Time
	UpdatedAt time.Time
	// Settings are the thresholds set at runtime (SetBrake), over the
	// type's declared ones and the defaults; zero fields are not set.
	Settings BrakeSettings
}

// BrakeSettings are a type's brake thresholds set at runtime: Window
// (1..10000 attempts, or -1 to turn the brake off), Threshold (0..1] and
// Cooldown (up to 24h). A zero field is not set: the type's declared value
// (Brake, keel.toml) or the default applies.
type BrakeSettings struct {
	Window    int
	Threshold float64
	Cooldown  time.Duration
}

// brakeFromRow returns a stored brake as the API shows it.
func brakeFromRow(r driver.BrakeRow) BrakeInfo {
	return BrakeInfo{Type: r.Type, State: r.State, OpenedAt: r.OpenedAt, Until: r.Until, ProbeTaskID: r.ProbeTaskID,
		ProbeNode: r.ProbeOwner, ProbeAt: r.ProbeAt, Ratio: r.Ratio, Attempts: r.Attempts, Reason: r.Reason,
		ClosedAt: r.ClosedAt, UpdatedAt: r.UpdatedAt, Settings: BrakeSettings(r.Config)}
}

// SetBrake replaces a type's runtime brake thresholds (see BrakeSettings;
// the zero value clears them). The leader applies them at its next
// evaluation, on every node's behalf. Bad values are ErrInvalid and write
// nothing.
func (c *Client) SetBrake(ctx context.Context, taskType string, s BrakeSettings) (*BrakeInfo, error) {
	return brakeInfo(c.brakes().Set(ctx, taskType, driver.BrakeConfig(s)))
}

// Brakes returns every stored brake (types whose brake never opened have
// none: they are closed), ordered by type.
func (c *Client) Brakes(ctx context.Context) ([]BrakeInfo, error) {
	rows, err := c.brakes().List(ctx)
	if err != nil || rows == nil {
		return nil, err
	}
	return conv.Slice(rows, brakeFromRow), nil
}

// CloseBrake closes a type's open or half-open brake by hand: its tasks
// are claimed again at once on this node and within SettingsInterval on
// the others, and the brake_open alert resolves at the next alert
// evaluation. Each node's window then starts afresh unless it already
// judges the type healthy. A brake that is not open is ErrWrongState; an
// invalid type name ErrInvalid.
func (c *Client) CloseBrake(ctx context.Context, taskType string) (*BrakeInfo, error) {
	return brakeInfo(c.brakes().Close(ctx, taskType))
}

// brakes returns the API's calls on c's stored brakes.
func (c *Client) brakes() *brake.Admin {
	b, _ := c.drv.(driver.Braker)
	return &brake.Admin{Driver: b, Now: c.cfg.Now, Wrap: unavailable, Reserved: reservedType,
		Closed: func(ctx context.Context) { c.eng.Load().BrakesChanged(ctx) }}
}

// brakeInfo returns the admin's answer as the API shows it.
func brakeInfo(row *driver.BrakeRow, err error) (*BrakeInfo, error) {
	if err != nil {
		return nil, err
	}
	info := brakeFromRow(*row)
	return &info, nil
}
