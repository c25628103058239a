package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/server"
)

func newQueueCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List queues, pause or resume one, or cap its concurrency or rate",
		Long: `queue shows and changes queues at runtime; every node applies a change within
a few seconds (engine.settings_interval).

  keel queue list
  keel queue pause mail
  keel queue set mail --concurrency 2    (across the cluster; 0 removes the cap)
  keel queue set mail --rate 50 --burst 5 (task starts per second; 0 removes it)`,
	}
	addAPIFlags(cmd, &f)
	list := &cobra.Command{
		Use:   "list",
		Short: "List queues with their task counts and settings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			l, raw, err := api.queues(cmd.Context())
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "QUEUE\tPENDING\tRUNNING\tSUCCEEDED\tDEAD\tCANCELLED\tPAUSED\tCONCURRENCY")
			for _, q := range l.Queues {
				conc := "-"
				if q.Concurrency > 0 {
					conc = fmt.Sprint(q.Concurrency)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", q.Name, count(q.Counts, "pending"), count(q.Counts, "running"),
					count(q.Counts, "succeeded"), count(q.Counts, "dead"), count(q.Counts, "cancelled"), yesNo(q.Paused), conc)
			}
			return tw.Flush()
		},
	}
	var concurrency, burst int
	var rate float64
	set := &cobra.Command{
		Use:   "set <name> [--concurrency N] [--rate R] [--burst N]",
		Short: "Cap how many of the queue's tasks run at once, or start per second, across the cluster (0 removes a cap)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p server.QueuePatch
			fs := cmd.Flags()
			if fs.Changed("concurrency") {
				p.Concurrency = &concurrency
			}
			if fs.Changed("rate") {
				if err := checkRateFlag(rate); err != nil {
					return err
				}
				p.Rate = &rate
			}
			if fs.Changed("burst") {
				p.Burst = &burst
			}
			if p == (server.QueuePatch{}) {
				return fmt.Errorf("nothing to set: give --concurrency N, --rate R or --burst N")
			}
			return changeQueue(cmd, &f, args[0], "", p)
		},
	}
	set.Flags().IntVar(&concurrency, "concurrency", 0, "tasks at once across the cluster, 0 for no cap")
	set.Flags().Float64Var(&rate, "rate", 0, "task starts per second across the cluster, 0 for no rate limit")
	set.Flags().IntVar(&burst, "burst", 0, "task starts at once after a quiet spell (the rate's bucket), 0 for max(1, ceil(rate))")
	cmd.AddCommand(list, queueAction(&f, "pause"), queueAction(&f, "resume"), set)
	return cmd
}

func queueAction(f *apiFlags, action string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " <name>",
		Short: map[string]string{"pause": "Stop every node from starting the queue's tasks", "resume": "Let nodes start the queue's tasks again"}[action],
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeQueue(cmd, f, args[0], action, nil)
		},
	}
}

func changeQueue(cmd *cobra.Command, f *apiFlags, name, action string, patch any) error {
	api, err := f.client()
	if err != nil {
		return err
	}
	var q server.Queue
	raw, err := api.setting(cmd.Context(), "queues", name, action, patch, &q)
	if err != nil {
		return err
	}
	if f.json {
		return printRaw(cmd.OutOrStdout(), raw)
	}
	conc := "no cap"
	if q.Concurrency > 0 {
		conc = fmt.Sprintf("%d cluster-wide", q.Concurrency)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "queue %s: paused %s, concurrency %s%s\n", q.Name, yesNo(q.Paused), conc, rateText(q.Rate, q.Burst))
	printWarnings(cmd.ErrOrStderr(), q.Warnings)
	return nil
}

// printWarnings writes the API's warnings about a change, one a line.
func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintln(w, "warning:", s)
	}
}

func newTypeCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "type",
		Short: "List task types, pause or resume one, cap its concurrency, or override its timeout and retries",
		Long: `type shows and changes task types at runtime; every node applies a change
within a few seconds (engine.settings_interval).

  keel type list
  keel type pause email.send
  keel type set email.send --timeout 2m --max-attempts 6
  keel type set email.send --concurrency 2 --rate 50 --burst 5
  keel type ramp start email.send --steps 1,2,5,10 --every 10m
  keel type ramp show email.send
  keel type set email.send --timeout 0    (0 removes an override or the cap)`,
	}
	addAPIFlags(cmd, &f)
	list := &cobra.Command{
		Use:   "list",
		Short: "List task types with their task counts and settings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			l, raw, err := api.types(cmd.Context())
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "TYPE\tPENDING\tRUNNING\tSUCCEEDED\tDEAD\tCANCELLED\tPAUSED\tCONCURRENCY\tRATE\tTIMEOUT\tMAX ATTEMPTS\tBACKOFF\tBRAKE\tON DEAD")
			for _, t := range l.Types {
				conc := "-"
				if t.Concurrency > 0 {
					conc = fmt.Sprint(t.Concurrency)
				}
				attempts := "-"
				if t.MaxAttempts > 0 {
					attempts = fmt.Sprint(t.MaxAttempts)
				}
				backoff := "-"
				if t.BackoffBase != nil || t.BackoffMax != nil {
					backoff = optDuration(t.BackoffBase) + ".." + optDuration(t.BackoffMax)
				}
				rate := "-"
				if t.Rate > 0 {
					rate = fmt.Sprint(t.Rate)
					if t.Burst > 0 {
						rate += fmt.Sprintf(" (burst %d)", t.Burst)
					}
				}
				onDead := "-"
				if t.OnDead != "" {
					onDead = t.OnDead
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, count(t.Counts, "pending"), count(t.Counts, "running"),
					count(t.Counts, "succeeded"), count(t.Counts, "dead"), count(t.Counts, "cancelled"), yesNo(t.Paused),
					conc, rate, optDuration(t.Timeout), attempts, backoff, t.Brake.State, onDead)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "(CONCURRENCY caps running tasks across the cluster, - for no cap; RATE is task starts per second across the cluster; keel type ramp show NAME shows a ramp; TIMEOUT, MAX ATTEMPTS and BACKOFF are runtime overrides; - means each task's own value applies; BRAKE is the automatic brake, see keel brakes; ON DEAD the follow-up type of a dead task)")
			return nil
		},
	}
	var timeout, base, maxDelay string
	var attempts, concurrency, burst int
	var rate float64
	set := &cobra.Command{
		Use:   "set <name> [--concurrency N] [--rate R] [--burst N] [--timeout D] [--max-attempts N] [--backoff-base D] [--backoff-max D]",
		Short: "Cap the type's concurrency or rate across the cluster or override its timeout, attempts or backoff on every node (0 removes a cap or override)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p server.TypePatch
			fs := cmd.Flags()
			for _, d := range []struct {
				flag, value string
				dst         **server.Duration
			}{{"timeout", timeout, &p.Timeout}, {"backoff-base", base, &p.BackoffBase}, {"backoff-max", maxDelay, &p.BackoffMax}} {
				if !fs.Changed(d.flag) {
					continue
				}
				v := config.Duration(0)
				if d.value != "0" {
					var err error
					if v, err = config.ParseDuration(d.value); err != nil {
						return fmt.Errorf("--%s: %w", d.flag, err)
					}
				}
				sd := server.Duration(v)
				*d.dst = &sd
			}
			if fs.Changed("max-attempts") {
				p.MaxAttempts = &attempts
			}
			if fs.Changed("concurrency") {
				p.Concurrency = &concurrency
			}
			if fs.Changed("rate") {
				if err := checkRateFlag(rate); err != nil {
					return err
				}
				p.Rate = &rate
			}
			if fs.Changed("burst") {
				p.Burst = &burst
			}
			if p == (server.TypePatch{}) {
				return fmt.Errorf("nothing to set: give --concurrency, --rate, --burst, --timeout, --max-attempts, --backoff-base or --backoff-max")
			}
			return changeType(cmd, &f, args[0], "", p)
		},
	}
	set.Flags().IntVar(&concurrency, "concurrency", 0, "the type's tasks at once across the cluster, 0 for no cap")
	set.Flags().Float64Var(&rate, "rate", 0, "the type's task starts per second across the cluster, 0 for no rate limit")
	set.Flags().IntVar(&burst, "burst", 0, "task starts at once after a quiet spell (the rate's bucket), 0 for max(1, ceil(rate))")
	set.Flags().StringVar(&timeout, "timeout", "", "bound of one attempt, e.g. 2m (0 removes the override)")
	set.Flags().IntVar(&attempts, "max-attempts", 0, "runs before dead-lettering, 1..1000 (0 removes the override)")
	set.Flags().StringVar(&base, "backoff-base", "", "first retry delay, e.g. 30s (0 removes the override)")
	set.Flags().StringVar(&maxDelay, "backoff-max", "", "longest retry delay, e.g. 1h (0 removes the override)")
	cmd.AddCommand(list, typeAction(&f, "pause"), typeAction(&f, "resume"), set, newRampCmd(&f))
	return cmd
}

func typeAction(f *apiFlags, action string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " <name>",
		Short: map[string]string{"pause": "Stop every node from starting the type's tasks", "resume": "Let nodes start the type's tasks again"}[action],
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeType(cmd, f, args[0], action, nil)
		},
	}
}

func changeType(cmd *cobra.Command, f *apiFlags, name, action string, patch any) error {
	api, err := f.client()
	if err != nil {
		return err
	}
	var t server.TaskType
	raw, err := api.setting(cmd.Context(), "types", name, action, patch, &t)
	if err != nil {
		return err
	}
	if f.json {
		return printRaw(cmd.OutOrStdout(), raw)
	}
	attempts := "-"
	if t.MaxAttempts > 0 {
		attempts = fmt.Sprint(t.MaxAttempts)
	}
	conc := "no cap"
	if t.Concurrency > 0 {
		conc = fmt.Sprintf("%d cluster-wide", t.Concurrency)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "type %s: paused %s, concurrency %s%s, timeout %s, max attempts %s, backoff %s..%s\n", t.Name, yesNo(t.Paused),
		conc, rateText(t.Rate, t.Burst), optDuration(t.Timeout), attempts, optDuration(t.BackoffBase), optDuration(t.BackoffMax))
	printWarnings(cmd.ErrOrStderr(), t.Warnings)
	return nil
}

func optDuration(d *server.Duration) string {
	if d == nil || *d == 0 {
		return "-"
	}
	return config.Duration(*d).String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newStatsCmd() *cobra.Command {
	var f apiFlags
	var watch bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show each queue and type: ready, running, dead, rates, oldest ready task, time to drain",
		Long: `Show each queue and type: ready, running and dead tasks, the finish rate over the
last 1, 5 and 15 minutes of work, the age of the oldest ready task, the time the
ready tasks take to start at the recent rate, and the dead letters of the last
hour. The figures come from the live counters: cheap on any table size.
--watch prints them again every --every (default 2s) until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < 100*time.Millisecond {
				return fmt.Errorf("--every must be at least 100ms, got %v", every)
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			for {
				st, raw, err := api.stats(cmd.Context())
				if err != nil {
					if watch && cmd.Context().Err() != nil {
						return nil // interrupted while watching
					}
					return err
				}
				if f.json {
					err = printRaw(cmd.OutOrStdout(), raw)
				} else {
					err = printStats(cmd.OutOrStdout(), st)
				}
				if err != nil || !watch {
					return err
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(every):
				}
				fmt.Fprintln(cmd.OutOrStdout())
			}
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().BoolVar(&watch, "watch", false, "print the figures again every --every until interrupted")
	cmd.Flags().DurationVar(&every, "every", 2*time.Second, "how often --watch refreshes")
	return cmd
}

func newNodesCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the worker processes registered with the database and their last heartbeat",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			l, raw, err := api.nodes(cmd.Context())
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printNodes(cmd.OutOrStdout(), l.Nodes)
		},
	}
	addAPIFlags(cmd, &f)
	return cmd
}

func printNodes(out io.Writer, nodes []server.Node) error {
	if len(nodes) == 0 {
		fmt.Fprintln(out, "no worker nodes registered")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "NODE	STATUS	HOST	PID	QUEUES (WORKERS)	RUNNING	VERSION	STARTED	HEARTBEAT")
	for _, n := range nodes {
		queues := make([]string, len(n.Queues))
		for i, q := range n.Queues {
			queues[i] = q
			if w, ok := n.Workers[q]; ok {
				queues[i] = fmt.Sprintf("%s(%d)", q, w)
			}
		}
		status := "alive"
		if n.Lost {
			status = "LOST"
		}
		fmt.Fprintf(tw, "%s	%s	%s	%d	%s	%d	%s	%s	%s\n", n.Name, status, n.Host, n.PID, orDash(strings.Join(queues, ",")), n.Running, orDash(n.Version), stamp(n.StartedAt), ago(n.HeartbeatAt))
	}
	return tw.Flush()
}

func printStats(out io.Writer, st server.Stats) error {
	fmt.Fprintf(out, "at %s, worker nodes: %d\n\n", stamp(st.At), st.Nodes)
	tw := newTable(out)
	fmt.Fprintln(tw, "QUEUE\tTYPE\tREADY\tRUNNING\tSCHEDULED\tDEAD\tDONE/S 1m\t5m\t15m\tOLDEST READY\tDRAIN\tDEAD (1h)\tNOTE")
	for _, q := range st.Queues {
		note := ""
		switch {
		case q.Paused:
			note = "paused"
		case !q.Served && q.Views["ready"] > 0:
			note = "no live worker"
		}
		fmt.Fprintf(tw, "%s\t*\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%s\t%s\t%d\t%s\n", q.Name, q.Views["ready"], q.Views["running"],
			q.Views["scheduled"]+q.Views["retrying"], q.Views["dead"], q.Rates.M1, q.Rates.M5, q.Rates.M15,
			oldestReady(q.OldestReadyAge, q.Views["ready"]), span(q.TimeToDrain), q.DeadLastHour, note)
		for _, t := range q.Types {
			note := ""
			switch {
			case t.Paused:
				note = "paused"
			case t.Braked:
				note = "braked: see keel brakes"
			}
			fmt.Fprintf(tw, "\t%s\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%s\t%s\t%d\t%s\n", t.Name, t.Views["ready"], t.Views["running"],
				t.Views["scheduled"]+t.Views["retrying"], t.Views["dead"], t.Rates.M1, t.Rates.M5, t.Rates.M15,
				oldestReady(t.OldestReadyAge, t.Views["ready"]), span(t.TimeToDrain), t.DeadLastHour, note)
		}
	}
	fmt.Fprintf(tw, "all\t\t%s\t%s\t\t%s\t\t\t\t\t\t%d\t\n", count(st.Counts, "pending"), count(st.Counts, "running"),
		count(st.Counts, "dead"), st.DeadLastHour)
	if err := tw.Flush(); err != nil {
		return err
	}
	k := st.Keel
	fmt.Fprintf(out, "\nkeel's own work (queue keel, in no figure above): %d ready, %d running, %d waiting, %d dead (%d in 1h); alert deliveries failing %d, given up %d; last hour %d failed attempts, %d idempotency hits\n",
		k.Queue.Views["ready"], k.Queue.Views["running"], k.Queue.Views["scheduled"]+k.Queue.Views["retrying"], k.Queue.Views["dead"],
		k.Queue.DeadLastHour, k.DeliveriesFailing, k.DeliveriesDead, k.FailedLastHour, k.HitsLastHour)
	if err := printSourceStats(out, st.Sources); err != nil {
		return err
	}
	if st.Alert {
		var rules []string
		n := 0
		for _, rule := range slices.Sorted(maps.Keys(st.Firing)) {
			rules = append(rules, fmt.Sprintf("%s %d", rule, st.Firing[rule]))
			n += st.Firing[rule]
		}
		fmt.Fprintf(out, "\nALERT: %d firing (%s): see keel alerts --firing\n", n, strings.Join(rules, ", "))
	}
	return nil
}

// oldestReady prints the oldest ready task's age for the stats table: "-"
// only when no task is ready; the age is counted in whole minutes, so a
// task ready for less than one shows as "<1m".
func oldestReady(age server.Duration, ready int64) string {
	switch {
	case ready == 0:
		return "-"
	case time.Duration(age) < time.Minute:
		return "<1m"
	}
	return short(time.Duration(age))
}

// span prints a duration for the stats table: "-" for none.
func span(d server.Duration) string {
	if d <= 0 {
		return "-"
	}
	return short(time.Duration(d))
}
