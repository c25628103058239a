package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel"

	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/server"
)

// checkRateFlag refuses a --rate the API cannot take (JSON has no NaN or
// infinity), before anything is sent.
func checkRateFlag(rate float64) error {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 {
		return fmt.Errorf("--rate must be a number of task starts per second, 0 or more, got %v", rate)
	}
	return nil
}

// rateText is ", rate R/s burst B" for a rate limit, or nothing.
func rateText(rate float64, burst int) string {
	if rate <= 0 {
		return ""
	}
	b := "default"
	if burst > 0 {
		b = strconv.Itoa(burst)
	}
	return fmt.Sprintf(", rate %s/s burst %s", strconv.FormatFloat(rate, 'g', -1, 64), b)
}

// newRampCmd is keel type ramp: start, show or stop a type's concurrency
// ramp.
func newRampCmd(f *apiFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ramp",
		Short: "Raise a type's cluster-wide concurrency step by step while its failures stay low",
		Long: `ramp raises a task type's cluster-wide concurrency step by step: every --every the
leader looks at the attempts that ended since the last step and sets the next
step while their failure ratio stays at most --max-failure-ratio (with at least
--min-attempts of them); otherwise it stops the ramp, keeps the concurrency and
records why.

  keel type ramp start email.send --steps 1,2,5,10 --every 10m
  keel type ramp show email.send
  keel type ramp stop email.send`,
	}
	var steps, every string
	var ratio float64
	var minAttempts int
	start := &cobra.Command{
		Use:   "start <type> --steps 1,2,5,10 [--every 10m] [--max-failure-ratio 0.2] [--min-attempts 20]",
		Short: "Start (or restart) a ramp at its first step",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req server.RampRequest
			for _, s := range strings.Split(steps, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil {
					return fmt.Errorf("--steps: %q is not a whole number (give rising concurrencies such as 1,2,5,10)", s)
				}
				req.Steps = append(req.Steps, n)
			}
			fs := cmd.Flags()
			if fs.Changed("every") {
				d, err := config.ParseDuration(every)
				if err != nil {
					return fmt.Errorf("--every: %w", err)
				}
				sd := server.Duration(d)
				req.Every = &sd
			}
			if fs.Changed("max-failure-ratio") {
				if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
					return fmt.Errorf("--max-failure-ratio must be in 0..1, got %v", ratio)
				}
				req.MaxFailureRatio = &ratio
			}
			if fs.Changed("min-attempts") {
				req.MinAttempts = &minAttempts
			}
			return rampCall(cmd, f, http.MethodPut, args[0], "", req)
		},
	}
	start.Flags().StringVar(&steps, "steps", "", "rising concurrencies, e.g. 1,2,5,10 (required)")
	start.Flags().StringVar(&every, "every", "", "how long each step lasts (default 10m)")
	start.Flags().Float64Var(&ratio, "max-failure-ratio", 0, "highest share of failed attempts a step may have and still advance (default 0.2)")
	start.Flags().IntVar(&minAttempts, "min-attempts", 0, "attempts that must end before a step is judged (default 20)")
	_ = start.MarkFlagRequired("steps")
	show := &cobra.Command{
		Use:   "show <type>",
		Short: "Show a type's ramp: its steps, the step set now, when it is judged next, why it stopped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return rampCall(cmd, f, http.MethodGet, args[0], "", nil)
		},
	}
	stop := &cobra.Command{
		Use:   "stop <type>",
		Short: "Stop a type's ramp where it stands (its concurrency stays)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return rampCall(cmd, f, http.MethodPost, args[0], "/stop", nil)
		},
	}
	cmd.AddCommand(start, show, stop)
	return cmd
}

// rampCall calls one ramp endpoint and prints the ramp.
func rampCall(cmd *cobra.Command, f *apiFlags, method, name, suffix string, body any) error {
	api, err := f.client()
	if err != nil {
		return err
	}
	var r server.RampInfo
	raw, err := api.call(cmd.Context(), method, "/v1/types/"+url.PathEscape(name)+"/ramp"+suffix, nil, body, &r)
	if err != nil {
		return err
	}
	if f.json {
		return printRaw(cmd.OutOrStdout(), raw)
	}
	steps := make([]string, len(r.Steps))
	for i, s := range r.Steps {
		steps[i] = strconv.Itoa(s)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "ramp %s: %s, step %d of %d (concurrency %d), steps %s every %s, max failure ratio %s, min attempts %d\n",
		r.Type, r.State, r.Step, len(r.Steps), r.Concurrency, strings.Join(steps, ","), config.Duration(r.Every),
		strconv.FormatFloat(r.MaxFailureRatio, 'g', -1, 64), r.MinAttempts)
	if r.NextAt != nil {
		fmt.Fprintf(w, "next step judged at %s\n", r.NextAt.Format("2006-01-02 15:04:05Z07:00"))
	}
	if r.Note != "" {
		fmt.Fprintln(w, r.Note)
	}
	if r.Reason != "" {
		fmt.Fprintln(w, "stopped:", r.Reason)
	}
	return nil
}

// applyLimits stores the cluster-wide limits of keel.toml's queues and
// types as their runtime settings and starts the types' ramps, once as
// keel serve starts. A
// ramp already stored with the same steps, interval and thresholds carries
// on (a restart does not restart it).
func applyLimits(ctx context.Context, c *keel.Client, cfg *config.Config, log *slog.Logger) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Queues)) {
		q := cfg.Queues[name]
		if q.Concurrency == 0 && q.Rate == 0 && q.Burst == 0 {
			continue
		}
		u := keel.QueueUpdate{Concurrency: &q.Concurrency, Rate: &q.Rate, Burst: &q.Burst}
		if _, err := c.UpdateQueue(ctx, name, u); err != nil {
			return fmt.Errorf("queues.%s: store its limits: %w", name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Types)) {
		t := cfg.Types[name]
		if t.Concurrency > 0 || t.Rate > 0 || t.Burst > 0 {
			u := keel.TypeUpdate{Rate: &t.Rate, Burst: &t.Burst}
			if t.Ramp == nil {
				u.Concurrency = &t.Concurrency
			}
			if _, err := c.UpdateType(ctx, name, u); err != nil {
				return fmt.Errorf("types.%s: store its limits: %w", name, err)
			}
		}
		if t.Ramp == nil {
			continue
		}
		want := keel.Ramp{Steps: t.Ramp.Steps, Every: t.Ramp.Every.D(), MaxFailureRatio: t.Ramp.MaxFailureRatio, MinAttempts: t.Ramp.MinAttempts}
		st, err := c.GetRamp(ctx, name)
		switch {
		case errors.Is(err, keel.ErrNotFound):
		case err != nil:
			return fmt.Errorf("types.%s.ramp: %w", name, err)
		case sameRamp(st.Ramp, want):
			continue
		}
		if _, err := c.StartRamp(ctx, name, want); err != nil {
			return fmt.Errorf("types.%s.ramp: %w", name, err)
		}
		log.Info("keel serve: ramp started", "type", name, "steps", t.Ramp.Steps)
	}
	return nil
}

// sameRamp reports whether a stored ramp is the configured one (its zero
// fields taken as keel's defaults).
func sameRamp(stored, want keel.Ramp) bool {
	def := func(r keel.Ramp) keel.Ramp {
		r.Every = cmp.Or(r.Every, 10*time.Minute)
		r.MaxFailureRatio = cmp.Or(r.MaxFailureRatio, 0.2)
		r.MinAttempts = cmp.Or(r.MinAttempts, 20)
		return r
	}
	a, b := def(stored), def(want)
	return slices.Equal(a.Steps, b.Steps) && a.Every == b.Every && a.MaxFailureRatio == b.MaxFailureRatio && a.MinAttempts == b.MinAttempts
}
