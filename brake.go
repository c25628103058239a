package keel

import (
	"time"

	"github.com/keelq/keel/driver"
)

// The automatic brake (seed 000 §3.1: after a timeout, retry, degrade,
// record). The leader watches every type's finished attempts: when, of a
// type's last Window attempts since its brake last closed, the failed share
// reaches Threshold, it opens the type's brake. Its tasks are then not
// claimed (they wait, pending) for Cooldown, and an alert (rule
// brake_open) fires. Then one node with a handler for the type runs one
// probe task: its success closes the brake (and resolves the alert), its
// failure reopens it for another Cooldown. An operator can close it by
// hand (Client.CloseBrake, the API, keel brake close). keel's own types
// never brake.

// The brake's defaults.
const (
	// DefaultBrakeWindow is how many of a type's latest attempts are
	// judged.
	DefaultBrakeWindow = 20
	// DefaultBrakeThreshold is the failed share that opens the brake.
	DefaultBrakeThreshold = 0.5
	// DefaultBrakeCooldown is how long an open brake waits before a probe.
	DefaultBrakeCooldown = 30 * time.Second
)

// Brake sets the type's automatic brake: it opens when, of the type's last
// window finished attempts, the failed share reaches threshold, and stays
// open for cooldown before one probe task runs. Zero arguments take the
// defaults (DefaultBrakeWindow 20, DefaultBrakeThreshold 0.5,
// DefaultBrakeCooldown 30s). Only meaningful on Handle and Declare; stored
// with the type's declared defaults, so the leader applies it whichever
// process it is. Default: the defaults.
func Brake(window int, threshold float64, cooldown time.Duration) Option {
	return func(o *options) {
		o.brake = &driver.BrakeConfig{Window: window, Threshold: threshold, Cooldown: cooldown}
	}
}

// NoBrake turns the automatic brake off for the type. Only meaningful on
// Handle and Declare.
func NoBrake() Option {
	return func(o *options) { o.brake = &driver.BrakeConfig{Window: -1} }
}
