package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/keelq/keel"
	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/dashboard"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/gcfloor"
	"github.com/keelq/keel/metrics"
	"github.com/keelq/keel/server"
	"github.com/keelq/keel/server/httptarget"
	"github.com/keelq/keel/source"
)

func newServeCmd() *cobra.Command {
	var c configFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API and the workers of the HTTP-target task types",
		Long: `serve opens the database (migrating it), serves the HTTP API and works the
task types whose configuration has a url, POSTing each task there. It reads
keel.toml (or --config), then KEEL_* variables, then flags; keel config check
shows the result. Without tokens it only listens on a loopback address.
SIGINT or SIGTERM stop it gracefully within shutdown_timeout.

  keel serve                                   ./keel.toml if present, SQLite ./keel.db
  keel serve --config /etc/keel.toml --dsn postgres://keel@db/keel
  KEEL_TOKEN=$(cat token) keel serve --listen 0.0.0.0:7400

` + envHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.load(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, stop, cfg, cmd.ErrOrStderr())
		},
	}
	c.register(cmd)
	return cmd
}

// serveHeapFloor is the heap keel serve may grow to before the garbage
// collector runs while its live heap is small (internal/gcfloor).
const serveHeapFloor = 32 << 20

// runServe runs keel serve with a loaded configuration until ctx ends
// (a signal), then shuts down gracefully. After ctx ends it calls
// unsignal, so that a second signal kills the process at once.
func runServe(ctx context.Context, unsignal func(), cfg *config.Config, stderr io.Writer) error {
	// Unless the operator set GOGC: a heap floor (internal/gcfloor), so
	// that the few megabytes keel serve keeps live are not collected 50
	// times a second under load.
	if os.Getenv("GOGC") == "" {
		defer gcfloor.Start(serveHeapFloor, time.Second)()
	}
	log := newLogger(cfg.Log, stderr)
	for _, w := range cfg.Warnings {
		log.Warn("keel: configuration: " + w)
	}
	targets, err := buildTargets(cfg)
	if err != nil {
		return err
	}
	m, err := metrics.New(metrics.Options{Logger: log})
	if err != nil {
		return err
	}
	for name, tg := range targets {
		tg.Metrics = m
		targets[name] = tg
	}
	dsn := cfg.Database.DSN
	if dsn == "" {
		dsn = cfg.Database.DB
	}
	drv, where, err := openStore(ctx, dsn, cfg.Database.Schema)
	if err != nil {
		return fmt.Errorf("open the database: %w", err)
	}
	defer drv.Close()
	log.Info("keel: database ready", "database", where)

	tp, shutdownTracing, err := newTracerProvider(ctx, cfg.Tracing)
	if err != nil {
		return err
	}
	tracingDone := false
	defer func() { // an early return: flush what was traced
		if !tracingDone {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			shutdownTracing(sctx) //nolint:errcheck // best effort on a failed start
		}
	}()
	if tp != nil {
		log.Info("keel: exporting traces", "otlp_endpoint", cfg.Tracing.OTLPEndpoint,
			"service_name", cfg.Tracing.ServiceName, "sample_ratio", cfg.Tracing.SampleRatio)
	}

	kc := clientConfig(cfg, drv, log)
	kc.TracerProvider = tp
	if cfg.Redis.Enabled() {
		rdb, gate, err := redisGate(cfg.Redis)
		if err != nil {
			return err
		}
		redis.SetLogger(keel.RedisLogger(log))
		defer rdb.Close()
		kc.RedisGate = gate
		log.Info("keel: Redis first gate on", "redis", config.RedactDSN(cfg.Redis.URL), "prefix", gate.Prefix,
			"gate_ttl", gate.TTL, "timeout", gate.Timeout)
	}
	if kc.Handlers, err = handlers(cfg, targets); err != nil {
		return err
	}
	client, err := keel.NewClient(kc)
	if err != nil {
		return err
	}
	if err := applyLimits(ctx, client, cfg, log); err != nil {
		return err
	}
	if err := m.Watch(client); err != nil {
		return err
	}
	tokens := make([]server.Token, len(cfg.Tokens))
	for i, t := range cfg.Tokens {
		tokens[i] = server.Token{Value: t.Token, Role: server.Role(t.Role)}
	}
	opts := server.Options{
		Tokens: tokens, MaxBodyBytes: cfg.HTTP.MaxBodyBytes, MaxBatch: cfg.HTTP.MaxBatch, Logger: log,
		Metrics: m, MetricsElsewhere: cfg.Metrics.Listen != "",
	}
	api, err := server.New(client, opts)
	if err != nil {
		return err
	}
	if cfg.HTTP.Dashboard {
		if api, err = withDashboard(api, client, tokens, log); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := httpServer(ctx, cfg, api, log)
	var metricsLn net.Listener
	var metricsSrv *http.Server
	if cfg.Metrics.Listen != "" {
		h, err := server.MetricsHandler(m, opts)
		if err != nil {
			ln.Close()
			return err
		}
		if metricsLn, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			ln.Close()
			return fmt.Errorf("metrics.listen: %w", err)
		}
		metricsSrv = httpServer(ctx, cfg, h, log)
	}

	sources, err := newSources(client, cfg, m, log)
	if err != nil {
		ln.Close()
		if metricsLn != nil {
			metricsLn.Close()
		}
		return err
	}

	worked := slices.Sorted(maps.Keys(cfg.WorkedQueues()))
	if len(worked) > 0 || (!cfg.Alerts.Off && len(cfg.Alerts.Webhooks) > 0) || len(cfg.Schedules) > 0 {
		if err := client.Start(ctx); err != nil {
			ln.Close()
			if metricsLn != nil {
				metricsLn.Close()
			}
			return err
		}
	} else {
		log.Info("keel: no type has a url, no alert webhook and no schedule: serving the API only, no workers (alerts and schedules are run by the processes that run workers)")
	}
	if len(cfg.Types) == 0 {
		log.Info("keel: no [types] configured: the API accepts tasks of any type")
	}
	if len(cfg.Tokens) == 0 {
		log.Warn("keel: no tokens configured: listening on loopback only, requests are not checked")
	}
	for _, src := range sources {
		if err := src.Start(ctx); err != nil {
			return err
		}
		sc := src.Config()
		log.Info("keel: consuming", "source", sc.Name, "kind", sc.Kind, "url", config.RedactDSN(sc.URL), "type", sc.Type)
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("keel: serving", "addr", ln.Addr().String(), "queues", worked, "tokens", len(cfg.Tokens))
	fmt.Fprintf(stderr, "keel: listening on http://%s\n", ln.Addr())
	if metricsSrv != nil {
		go func() { serveErr <- metricsSrv.Serve(metricsLn) }()
		log.Info("keel: serving metrics", "addr", metricsLn.Addr().String())
		fmt.Fprintf(stderr, "keel: metrics on http://%s/metrics\n", metricsLn.Addr())
	}

	var failed error
	select {
	case <-ctx.Done():
		log.Info("keel: shutting down", "within", cfg.ShutdownTimeout.String())
	case err := <-serveErr:
		failed = fmt.Errorf("http server: %w", err)
		log.Error("keel: http server failed, shutting down", "error", err)
	}
	unsignal()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.D())
	defer cancel()
	for _, hs := range []*http.Server{srv, metricsSrv} {
		if hs == nil {
			continue
		}
		if err := hs.Shutdown(sctx); err != nil {
			log.Warn("keel: open requests did not finish in time; closing them", "error", err)
			hs.Close()
		}
	}
	// The sources stop first: their batch in hand is stored and
	// acknowledged, or handed back to the broker.
	for _, src := range sources {
		if err := src.Stop(sctx); err != nil {
			log.Warn("keel: stopping a source", "error", err)
		}
	}
	if err := client.Stop(sctx); err != nil {
		log.Warn("keel: stopping workers", "error", err)
	}
	// The last attempts' spans end with Stop: send them before exiting.
	tracingDone = true
	if err := shutdownTracing(sctx); err != nil {
		log.Warn("keel: flushing traces", "error", err)
	}
	log.Info("keel: stopped")
	return failed
}

// newSources builds the [[sources]] blocks' consumers of client; their
// metrics are served with m's.
func newSources(client *keel.Client, cfg *config.Config, m *metrics.Collector, log *slog.Logger) ([]*source.Source, error) {
	var out []*source.Source
	for _, b := range cfg.Sources {
		sc := b.Config()
		sc.Logger = log
		sc.Registerer = m.Registerer()
		src, err := source.New(client, sc)
		if err != nil {
			return nil, fmt.Errorf("sources: %w", err)
		}
		out = append(out, src)
	}
	return out, nil
}

// withDashboard serves the API's routes (/v1/..., /healthz, /readyz,
// /metrics) with api and every other path with the web dashboard, mounted
// at "/" with the same tokens.
func withDashboard(api http.Handler, client *keel.Client, tokens []server.Token, log *slog.Logger) (http.Handler, error) {
	dash, err := dashboard.New(client, dashboard.Options{Tokens: tokens, Logger: log})
	if err != nil {
		return nil, err
	}
	// Not a ServeMux: it would answer an unclean path (//v1//stats) with a
	// redirect before api or dash check the request's Host. Both check it
	// first, then clean the path themselves.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := path.Clean("/" + r.URL.Path); {
		case p == "/v1" || strings.HasPrefix(p, "/v1/") || p == "/healthz" || p == "/readyz" || p == "/metrics":
			api.ServeHTTP(w, r)
		default:
			dash.ServeHTTP(w, r)
		}
	}), nil
}

// httpServer returns the HTTP server of handler h with the configured
// timeouts; its requests' contexts outlive ctx (Shutdown ends them).
func httpServer(ctx context.Context, cfg *config.Config, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.D(),
		ReadTimeout:       cfg.HTTP.ReadTimeout.D(),
		WriteTimeout:      cfg.HTTP.WriteTimeout.D(),
		IdleTimeout:       cfg.HTTP.IdleTimeout.D(),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}

func newLogger(l config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(l.Level)) //nolint:errcheck // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// buildTargets returns the HTTP target of each type with a url, checked
// by httptarget as Register will check it.
func buildTargets(cfg *config.Config) (map[string]httptarget.Target, error) {
	targets := map[string]httptarget.Target{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.Types)) {
		t := cfg.Types[name]
		if !t.IsTarget() {
			continue
		}
		tg := httptarget.Target{
			URL: t.URL, ConnectTimeout: t.ConnectTimeout.D(), ReadTimeout: t.ReadTimeout.D(),
			MaxResultBytes: t.MaxResultBytes, Headers: t.Headers,
		}
		if err := tg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("types.%s: %w", name, err))
			continue
		}
		targets[name] = tg
	}
	return targets, errors.Join(errs...)
}

// clientConfig maps the configuration onto keel.Config, all but Handlers.
func clientConfig(cfg *config.Config, drv driver.Driver, log *slog.Logger) keel.Config {
	e, r := cfg.Engine, cfg.Retention
	jitter := e.BackoffJitter
	if jitter == 0 {
		jitter = -1 // keel reads 0 as "default"; a negative value turns jitter off
	}
	queues := map[string]keel.QueueConfig{} // empty, not nil: nil means keel's default queue
	for name, q := range cfg.WorkedQueues() {
		prefetch := q.Prefetch
		if prefetch == 0 {
			prefetch = keel.NoPrefetch // keel reads 0 as "default"
		}
		queues[name] = keel.QueueConfig{MaxWorkers: q.Workers, Prefetch: prefetch}
	}
	return keel.Config{
		Driver: drv, Queues: queues, Node: e.Node, Logger: log,
		// With no [types] there is nothing to be strict against: a server
		// that stores tasks for others accepts any valid type.
		AnyType:     cfg.AnyType || len(cfg.Types) == 0,
		MaxAttempts: e.MaxAttempts, Timeout: e.Timeout.D(),
		BackoffBase: e.BackoffBase.D(), BackoffMax: e.BackoffMax.D(), BackoffJitter: jitter,
		LeaseTTL: e.LeaseTTL.D(), HeartbeatInterval: e.HeartbeatInterval.D(), PollInterval: e.PollInterval.D(),
		RescueInterval: e.RescueInterval.D(), ReconcileInterval: e.ReconcileInterval.D(),
		MaintainInterval: e.MaintainInterval.D(), HistoryRetention: e.HistoryRetention.D(),
		SettingsInterval: e.SettingsInterval.D(), ClaimBatch: e.ClaimBatch,
		TimeoutGrace: e.TimeoutGrace.D(), MaxPayloadBytes: e.MaxPayloadBytes, Version: keelVersion(),
		RetainSucceeded: r.Succeeded.D(), RetainDead: r.Dead.D(),
		DeleteArchivedAfter: r.Archive.D(), ArchiveInterval: r.Interval.D(),
		Alerts:    alertConfig(cfg.Alerts),
		Schedules: schedules(cfg.Schedules),
	}
}

// redisGate makes the Redis client and the gate of [redis]. The client
// connects lazily: Redis down at start only skips the gate. Every call is
// bounded by the gate's timeout: the client heeds its context's deadline,
// and its read, write and pool timeouts (3 s, 3 s and 4 s by default) are
// the gate's unless the URL sets them, so a hung Redis neither holds a
// caller nor a pooled connection for seconds. It does not retry: a retry
// would come after the gate gave up.
func redisGate(r config.Redis) (*redis.Client, *keel.RedisGate, error) {
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis.url: %w", err)
	}
	timeout := r.Timeout.D()
	if timeout <= 0 {
		timeout = 50 * time.Millisecond // keel.RedisGate's default
	}
	opts.ContextTimeoutEnabled = true
	for _, d := range []*time.Duration{&opts.ReadTimeout, &opts.WriteTimeout, &opts.PoolTimeout} {
		if *d == 0 {
			*d = timeout
		}
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	rdb := redis.NewClient(opts)
	return rdb, &keel.RedisGate{Client: rdb, Prefix: r.Prefix, TTL: r.GateTTL.D(), Timeout: r.Timeout.D(), Wait: r.Wait.D()}, nil
}

// schedules maps [[schedules]] onto keel.Schedule.
func schedules(in []config.Schedule) []keel.Schedule {
	var out []keel.Schedule
	for _, s := range in {
		out = append(out, s.KeelSchedule())
	}
	return out
}

// alertConfig maps [alerts] onto keel.AlertConfig.
func alertConfig(a config.Alerts) keel.AlertConfig {
	rules := keel.AlertRules{DeadPerHour: a.DeadPerHour, OldestReadyAge: a.OldestReadyAge.D(),
		FailureRatio: a.FailureRatio, FailureMinAttempts: a.FailureMinAttempts, FailureWindow: a.FailureWindow.D(),
		NoLiveWorker: a.NoLiveWorker, NodeLost: a.NodeLost}
	out := keel.AlertConfig{Rules: &rules, Interval: a.Interval.D(), RetryMax: a.RetryMax.D(), Off: a.Off}
	for _, w := range a.Webhooks {
		out.Notifiers = append(out.Notifiers, &keel.WebhookNotifier{ID: w.Name, URL: w.URL, Headers: w.Headers})
	}
	return out
}

// handlers registers every configured type with its defaults: an HTTP
// target for a type with a url, a declared (enqueue-only) type for the
// others, which another process works. config rejects an enqueue-only type
// on a queue this server works, so no worker here claims one.
func handlers(cfg *config.Config, targets map[string]httptarget.Target) (*keel.Handlers, error) {
	h := keel.NewHandlers()
	for _, name := range slices.Sorted(maps.Keys(cfg.Types)) {
		t := cfg.Types[name]
		opts := []keel.Option{keel.Queue(t.Queue), keel.Priority(t.Priority), keel.MaxAttempts(t.MaxAttempts), keel.Timeout(t.Timeout.D())}
		if t.OnDead != "" {
			opts = append(opts, keel.OnDead(t.OnDead))
		}
		switch b := t.Brake; {
		case b.Off:
			opts = append(opts, keel.NoBrake())
		case b != config.TypeBrake{}:
			opts = append(opts, keel.Brake(b.Window, b.Threshold, b.Cooldown.D()))
		}
		if !t.IsTarget() {
			keel.Declare(h, name, opts...)
			continue
		}
		opts = append(opts, keel.Backoff(t.BackoffBase.D(), t.BackoffMax.D()))
		if err := httptarget.Register(h, name, targets[name], opts...); err != nil {
			return nil, fmt.Errorf("types.%s: %w", name, err)
		}
	}
	return h, nil
}
