package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/server"
)

// TestLimitsCLI: rates and bursts through keel queue/type set, ramps
// through keel type ramp, and bad values refused before anything is
// stored.
func TestLimitsCLI(t *testing.T) {
	s := newAPI(t, serverOpts{})
	s.keel(t, "enqueue", "email", "{}", "--queue", "mail")
	if out := s.keel(t, "queue", "set", "mail", "--rate", "50", "--burst", "5"); out != "queue mail: paused no, concurrency no cap, rate 50/s burst 5\n" {
		t.Fatalf("queue set --rate: %q", out)
	}
	out := s.keel(t, "type", "set", "email", "--concurrency", "2", "--rate", "0.5")
	if out != "type email: paused no, concurrency 2 cluster-wide, rate 0.5/s burst default, timeout -, max attempts -, backoff -..-\n" {
		t.Fatalf("type set --rate: %q", out)
	}
	tl := decode[server.TypeList](t, s.keel(t, "type", "list", "--json"))
	var found bool
	for _, ty := range tl.Types {
		if ty.Name == "email" {
			found = ty.Concurrency == 2 && ty.Rate == 0.5 && ty.Burst == 0 && ty.Ramp == nil
		}
	}
	if !found {
		t.Fatalf("type list --json: %+v", tl.Types)
	}
	for _, bad := range [][]string{
		{"type", "set", "email", "--rate", "-1"},
		{"type", "set", "email", "--rate", "NaN"},
		{"type", "set", "email", "--burst", "-2"},
		{"queue", "set", "mail", "--rate", "2000000"},
		{"type", "ramp", "start", "email", "--steps", "2,1"},
		{"type", "ramp", "start", "email", "--steps", "1,x"},
		{"type", "ramp", "start", "email", "--steps", "1,2", "--every", "0s"},
		{"type", "ramp", "start", "email", "--steps", "1,2", "--max-failure-ratio", "2"},
		{"type", "ramp", "start", "email", "--steps", "1,2", "--min-attempts", "0"},
	} {
		if err := s.keelErr(t, bad...); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	if err := s.keelErr(t, "type", "ramp", "show", "email"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("ramp show before a start: %v, want HTTP 404", err)
	}
	out = s.keel(t, "type", "ramp", "start", "email", "--steps", "1,2,5", "--every", "1m", "--min-attempts", "3")
	if !strings.HasPrefix(out, "ramp email: running, step 1 of 3 (concurrency 1), steps 1,2,5 every 1m, max failure ratio 0.2, min attempts 3\nnext step judged at ") {
		t.Fatalf("ramp start: %q", out)
	}
	if out := s.keel(t, "type", "set", "email", "--rate", "0"); !strings.Contains(out, "concurrency 1 cluster-wide, timeout") {
		t.Fatalf("the ramp's first step and a cleared rate: %q", out)
	}
	out = s.keel(t, "type", "ramp", "stop", "email")
	if !strings.HasPrefix(out, "ramp email: stopped, step 1 of 3") || !strings.Contains(out, "stopped: stopped by an operator") {
		t.Fatalf("ramp stop: %q", out)
	}
	r := decode[server.RampInfo](t, s.keel(t, "type", "ramp", "show", "email", "--json"))
	if r.State != "stopped" || r.Concurrency != 1 || r.NextAt != nil {
		t.Fatalf("ramp show --json: %+v", r)
	}
}

// TestApplyLimits: keel serve stores keel.toml's limits and starts its
// ramps, and a restart with the same ramp does not restart it.
func TestApplyLimits(t *testing.T) {
	drv, err := sqlite.Open(t.Context(), t.TempDir()+"/keel.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	c, err := keel.NewClient(keel.Config{Driver: drv, AnyType: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Queues: map[string]config.Queue{"mail": {Workers: 4, Concurrency: 5, Rate: 20, Burst: 4}, "default": {Workers: 10}}, Types: map[string]config.Type{
		"a": {Concurrency: 3, Rate: 7.5, Burst: 2},
		"b": {Rate: 1, Ramp: &config.Ramp{Steps: []int{1, 4}, Every: config.Duration(time.Minute)}},
	}}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	if err := applyLimits(t.Context(), c, cfg, log); err != nil {
		t.Fatal(err)
	}
	types, err := c.Types(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]keel.TypeInfo{}
	for _, ty := range types {
		got[ty.Name] = ty
	}
	if a := got["a"]; a.Concurrency != 3 || a.Rate != 7.5 || a.Burst != 2 {
		t.Fatalf("type a %+v, want concurrency 3, rate 7.5, burst 2", a)
	}
	if b := got["b"]; b.Concurrency != 1 || b.Rate != 1 {
		t.Fatalf("type b %+v, want the ramp's first step 1 and rate 1", b)
	}
	queues, err := c.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	gotQ := map[string]keel.QueueInfo{}
	for _, q := range queues {
		gotQ[q.Name] = q
	}
	if q := gotQ["mail"]; q.Concurrency != 5 || q.Rate != 20 || q.Burst != 4 {
		t.Fatalf("queue mail %+v, want concurrency 5, rate 20, burst 4", q)
	}
	if q, ok := gotQ["default"]; ok && (q.Concurrency != 0 || q.Rate != 0) {
		t.Fatalf("queue default %+v: no limits were configured", q)
	}
	first, err := c.GetRamp(t.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := applyLimits(t.Context(), c, cfg, log); err != nil {
		t.Fatal(err)
	}
	again, err := c.GetRamp(t.Context(), "b")
	if err != nil || !again.StartedAt.Equal(first.StartedAt) {
		t.Fatalf("ramp after a second start: %+v, %v; want the first one carried on", again, err)
	}
}
