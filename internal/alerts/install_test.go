package alerts_test

import (
	"testing"
	"time"

	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/engine"
)

func TestInstall(t *testing.T) {
	a := alerts.New(alerts.Config{RetryMax: time.Hour, Notifiers: []alerts.Notifier{{Name: "ops"}}})
	for _, tc := range []struct {
		poll, interval, wantPoll time.Duration
	}{
		{time.Second, time.Minute, time.Minute},
		{time.Hour, time.Minute, time.Hour},
	} {
		cfg := engine.Config{PollInterval: tc.poll, Queues: map[string]int{"default": 10},
			Handlers: map[string]engine.Handler{}, TypeBackoff: map[string]backoff.Policy{}}
		a.Install(&cfg, 4, tc.interval)
		if cfg.Queues[alerts.Queue] != 4 || cfg.Queues["default"] != 10 || cfg.QueuePoll[alerts.Queue] != tc.wantPoll {
			t.Errorf("queues %v, poll %v", cfg.Queues, cfg.QueuePoll)
		}
		for _, typ := range []string{alerts.DrillType, alerts.NotifyType(alerts.LogNotifier), alerts.NotifyType("ops")} {
			if cfg.Handlers[typ] == nil || cfg.TypeBackoff[typ] != a.Backoff() {
				t.Errorf("%s: no handler or backoff", typ)
			}
		}
		if len(cfg.Loops) != 1 || cfg.Loops[0].Interval != tc.interval {
			t.Errorf("loops %+v", cfg.Loops)
		}
	}
}
