package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/check"
	kconfig "github.com/keelq/keel/internal/config"
)

var (
	schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	headerPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// MinDeadRetention is the shortest dead-letter retention allowed (seed 000
// §3.2: keep dead letters at least a week).
const MinDeadRetention = keel.MinRetainDead

// MinSucceededRetention is the shortest retention of succeeded and
// cancelled tasks allowed: a minute, so a test can watch archival happen.
const MinSucceededRetention = time.Minute

// MinTokenLength is the shortest token accepted.
const MinTokenLength = 16

type checker struct {
	c    *Config
	errs []error
}

// bad records a problem with key, naming where its value came from when
// that was not the file.
func (v *checker) bad(key, format string, args ...any) {
	label := key
	switch v.c.Source(key) {
	case SourceEnv:
		if f, ok := lookupField(key); ok {
			label += " (from " + f.Env + ")"
		}
	case SourceFlag:
		label += " (from a flag)"
	}
	v.errs = append(v.errs, fmt.Errorf("%s: %s", label, fmt.Sprintf(format, args...)))
}

func (v *checker) positive(key string, d Duration) {
	if d <= 0 {
		v.bad(key, "must be positive, got %q", d)
	}
}

func (c *Config) validate() error {
	v := &checker{c: c}
	c.Warnings = nil
	c.validateServer(v)
	c.validateEngine(v)
	c.validateQueuesAndTypes(v)
	c.validateTracing(v)
	c.validateRedis(v)
	c.validateAlerts(v)
	c.validateSchedules(v)
	c.validateSources(v)
	return errors.Join(v.errs...)
}

func (c *Config) validateServer(v *checker) {
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		v.bad("listen", "must be host:port such as 127.0.0.1:7400, got %q", c.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.bad("listen", "invalid port in %q", c.Listen)
	} else if len(c.Tokens) == 0 && !IsLoopback(host) {
		v.bad("listen", "%q is not a loopback address and no tokens are configured: add [[tokens]] (or set KEEL_TOKEN), or listen on 127.0.0.1", c.Listen)
	}
	v.positive("shutdown_timeout", c.ShutdownTimeout)

	switch dsn := c.Database.DSN; {
	case dsn == "":
		if c.Database.DB == "" {
			v.bad("database.db", "must name the SQLite file when database.dsn is empty")
		}
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if !schemaPattern.MatchString(c.Database.Schema) {
			v.bad("database.schema", "must be 1-63 lower-case letters, digits and '_', not starting with a digit, got %q", c.Database.Schema)
		}
	case strings.HasPrefix(dsn, "mysql://"):
	default:
		v.bad("database.dsn", "must be a postgres:// or mysql:// URL (leave it empty for SQLite at database.db), got %q", RedactDSN(dsn))
	}

	seen := map[string]int{}
	for i, t := range c.Tokens {
		key, tokenKey := fmt.Sprintf("tokens[%d]", i), fmt.Sprintf("tokens[%d].token", i)
		if t.From == fromKeelToken {
			key, tokenKey = "KEEL_TOKEN", "KEEL_TOKEN"
		}
		switch t.Role {
		case RoleAdmin, RoleEnqueue, RoleRead:
		default:
			v.bad(key+".role", "must be admin, enqueue or read, got %q", t.Role)
		}
		switch {
		case len(t.Token) < MinTokenLength:
			v.bad(tokenKey, "must be at least %d characters, got %d", MinTokenLength, len(t.Token))
		case strings.ContainsAny(t.Token, " \t\r\n"):
			v.bad(tokenKey, "must not contain white space")
		}
		if j, dup := seen[t.Token]; dup && t.Token != "" {
			v.bad(tokenKey, "is the same token as tokens[%d]", j)
		}
		seen[t.Token] = i
	}

	for _, p := range []struct {
		key string
		d   Duration
	}{
		{"http.read_header_timeout", c.HTTP.ReadHeaderTimeout}, {"http.read_timeout", c.HTTP.ReadTimeout},
		{"http.write_timeout", c.HTTP.WriteTimeout}, {"http.idle_timeout", c.HTTP.IdleTimeout},
	} {
		v.positive(p.key, p.d)
	}
	if c.HTTP.MaxBodyBytes < 1024 {
		v.bad("http.max_body_bytes", "must be at least 1024, got %d", c.HTTP.MaxBodyBytes)
	}
	if c.HTTP.MaxBatch < 1 || c.HTTP.MaxBatch > 10000 {
		v.bad("http.max_batch", "must be in 1..10000, got %d", c.HTTP.MaxBatch)
	}

	if c.Retention.Dead.D() < MinDeadRetention {
		v.bad("retention.dead", "must be at least 7d (dead letters are kept a week or more), got %q", c.Retention.Dead)
	}
	if c.Retention.Succeeded.D() < MinSucceededRetention {
		v.bad("retention.succeeded", "must be at least 1m, got %q", c.Retention.Succeeded)
	}
	if c.Retention.Archive < 0 {
		v.bad("retention.archive", "must be positive, or empty or \"0s\" to keep archived tasks for ever, got %q", c.Retention.Archive)
	}
	v.positive("retention.interval", c.Retention.Interval)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		v.bad("log.format", "must be text or json, got %q", c.Log.Format)
	}
	if l := c.Metrics.Listen; l != "" {
		if host, port, err := net.SplitHostPort(l); err != nil {
			v.bad("metrics.listen", "must be host:port such as 127.0.0.1:9090, got %q", l)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			v.bad("metrics.listen", "invalid port in %q", l)
		} else if len(c.Tokens) == 0 && !IsLoopback(host) {
			v.bad("metrics.listen", "%q is not a loopback address and no tokens are configured: add [[tokens]] (or set KEEL_TOKEN), or listen on 127.0.0.1", l)
		} else if l == c.Listen && port != "0" { // port 0: each listener gets its own
			v.bad("metrics.listen", "%q is the API's listen address: leave metrics.listen empty to serve GET /metrics there", l)
		}
	}
}

func (c *Config) validateEngine(v *checker) {
	e := c.Engine
	if e.MaxAttempts < 1 || e.MaxAttempts > 1000 {
		v.bad("engine.max_attempts", "must be in 1..1000, got %d", e.MaxAttempts)
	}
	if e.Timeout.D() < time.Millisecond {
		v.bad("engine.timeout", "must be at least 1ms, got %q", e.Timeout)
	}
	for _, p := range []struct {
		key string
		d   Duration
	}{
		{"engine.backoff_base", e.BackoffBase}, {"engine.backoff_max", e.BackoffMax},
		{"engine.lease_ttl", e.LeaseTTL}, {"engine.heartbeat_interval", e.HeartbeatInterval},
		{"engine.poll_interval", e.PollInterval}, {"engine.rescue_interval", e.RescueInterval},
		{"engine.reconcile_interval", e.ReconcileInterval}, {"engine.maintain_interval", e.MaintainInterval},
		{"engine.history_retention", e.HistoryRetention},
		{"engine.settings_interval", e.SettingsInterval}, {"engine.timeout_grace", e.TimeoutGrace},
	} {
		v.positive(p.key, p.d)
	}
	if e.HistoryRetention > 0 && e.HistoryRetention < Duration(time.Hour) {
		v.bad("engine.history_retention", "must be at least 1h (stats read the last hour), got %q", e.HistoryRetention)
	}
	if e.BackoffMax < e.BackoffBase {
		v.bad("engine.backoff_max", "%q must not be below engine.backoff_base %q", e.BackoffMax, e.BackoffBase)
	}
	if e.BackoffJitter < 0 || e.BackoffJitter >= 1 {
		v.bad("engine.backoff_jitter", "must be in 0 (none) up to below 1, got %v", e.BackoffJitter)
	}
	if e.HeartbeatInterval >= e.LeaseTTL && e.HeartbeatInterval > 0 {
		v.bad("engine.heartbeat_interval", "%q must be shorter than engine.lease_ttl %q", e.HeartbeatInterval, e.LeaseTTL)
	}
	if e.ClaimBatch < 1 || e.ClaimBatch > 1000 {
		v.bad("engine.claim_batch", "must be in 1..1000, got %d", e.ClaimBatch)
	}
	if e.MaxPayloadBytes < 1 {
		v.bad("engine.max_payload_bytes", "must be positive, got %d", e.MaxPayloadBytes)
	} else if int64(e.MaxPayloadBytes) > c.HTTP.MaxBodyBytes {
		c.Warnings = append(c.Warnings, fmt.Sprintf(
			"engine.max_payload_bytes (%d) is above http.max_body_bytes (%d): the body limit rejects the largest payloads first",
			e.MaxPayloadBytes, c.HTTP.MaxBodyBytes))
	}
	if e.Node != "" && !driver.ValidName(e.Node) {
		v.bad("engine.node", "must be 1-128 letters, digits, '_', '.', ':' or '-', got %q", e.Node)
	}
}

func (c *Config) validateQueuesAndTypes(v *checker) {
	worked := c.WorkedQueues()
	for _, name := range slices.Sorted(maps.Keys(c.Queues)) {
		key := "queues." + name
		if !driver.ValidName(name) {
			v.bad(key, "invalid queue name %q: use 1-128 letters, digits, '_', '.', ':' or '-'", name)
		}
		q := c.Queues[name]
		if q.Workers < 1 || q.Workers > 10000 {
			v.bad(key+".workers", "must be in 1..10000, got %d", q.Workers)
		} else if most := kconfig.PrefetchBound(q.Workers); q.Prefetch < 0 || q.Prefetch > most {
			v.bad(key+".prefetch", "must be in 0..%d (0: off; at most %d×workers and %d), got %d",
				most, kconfig.PrefetchPerWorker, kconfig.MaxPrefetch, q.Prefetch)
		}
		validateRate(v, key, q.Concurrency, q.Rate, q.Burst)
		if _, ok := worked[name]; !ok && c.Source("queues") == SourceFile {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: no type with a url uses this queue, so this server does not work it", key))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Types)) {
		c.validateType(v, name, c.Types[name], worked)
	}
}

func (c *Config) validateType(v *checker, name string, t Type, worked map[string]Queue) {
	key := "types." + name
	if !driver.ValidName(name) {
		v.bad(key, "invalid type name %q: use 1-128 letters, digits, '_', '.', ':' or '-'", name)
	}
	if !driver.ValidName(t.Queue) {
		v.bad(key+".queue", "invalid queue name %q", t.Queue)
	}
	if t.Priority < -1_000_000 || t.Priority > 1_000_000 {
		v.bad(key+".priority", "must be in -1000000..1000000, got %d", t.Priority)
	}
	if t.MaxAttempts < 1 || t.MaxAttempts > 1000 {
		v.bad(key+".max_attempts", "must be in 1..1000, got %d", t.MaxAttempts)
	}
	report := func(field, problem string) { v.bad(key+"."+field, "%s", problem) }
	check.Timeout("timeout", t.Timeout.D(), report) // as PATCH /v1/types/{name} checks it
	validateLimits(v, key, t)
	if t.OnDead != "" {
		_, known := c.Types[t.OnDead]
		switch {
		case strings.HasPrefix(t.OnDead, "keel."):
			v.bad(key+".on_dead", "type names starting with \"keel.\" are reserved for keel's own tasks, got %q", t.OnDead)
		case t.OnDead == name:
			v.bad(key+".on_dead", "names the type itself: a dead follow-up would follow up on itself")
		case !known:
			v.bad(key+".on_dead", "type %q is not configured: add [types.%q]", t.OnDead, t.OnDead)
		}
	}
	if b := t.Brake; b.Window < 0 || b.Window > 10000 {
		v.bad(key+".brake.window", "must be in 1..10000 (0: the default 20), got %d", b.Window)
	}
	if b := t.Brake; b.Threshold < 0 || b.Threshold > 1 || math.IsNaN(b.Threshold) {
		v.bad(key+".brake.threshold", "must be in (0, 1] (0: the default 0.8), got %v", b.Threshold)
	}
	if t.Brake.Cooldown < 0 {
		v.bad(key+".brake.cooldown", "must not be negative (0: the default 30s), got %q", t.Brake.Cooldown)
	} else if t.Brake.Cooldown.D()%time.Millisecond != 0 {
		v.bad(key+".brake.cooldown", "must be a whole number of milliseconds (settings are stored in ms), got %q", t.Brake.Cooldown)
	}
	if !t.IsTarget() {
		for _, f := range []string{"connect_timeout", "read_timeout", "max_result_bytes", "headers", "headers_env", "backoff_base", "backoff_max", "brake"} {
			if c.Source(key+"."+f) == SourceFile {
				v.bad(key+"."+f, "applies only to a type with a url (the process that works an enqueue-only type sets its own)")
			}
		}
		if _, ok := worked[t.Queue]; ok {
			v.bad(key+".queue", "queue %q is worked by this server (types with a url use it), so this enqueue-only type's tasks would fail there with \"no handler\": give it a queue of its own", t.Queue)
		}
		return
	}
	if u, err := url.Parse(t.URL); err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.bad(key+".url", "must be an absolute http(s) URL, got %q", t.URL)
	}
	v.positive(key+".connect_timeout", t.ConnectTimeout)
	v.positive(key+".read_timeout", t.ReadTimeout)
	check.Backoff("backoff_base", t.BackoffBase.D(), report)
	check.Backoff("backoff_max", t.BackoffMax.D(), report)
	if t.BackoffMax < t.BackoffBase {
		v.bad(key+".backoff_max", "%q must not be below backoff_base %q", t.BackoffMax, t.BackoffBase)
	}
	if t.MaxResultBytes < 1 || t.MaxResultBytes > 16<<20 {
		v.bad(key+".max_result_bytes", "must be in 1..16777216 (16 MiB), got %d", t.MaxResultBytes)
	}
	for _, h := range slices.Sorted(maps.Keys(t.Headers)) {
		if !headerPattern.MatchString(h) {
			v.bad(key+".headers", "invalid header name %q", h)
		}
		if strings.ContainsAny(t.Headers[h], "\r\n\x00") {
			v.bad(key+".headers."+h, "must not contain line breaks")
		}
	}
	if _, ok := c.Queues[t.Queue]; !ok {
		v.bad(key+".queue", "queue %q is not configured: add [queues.%s] with workers = N", t.Queue, t.Queue)
	}
	if t.ReadTimeout >= t.Timeout && t.Timeout > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf(
			"%s.read_timeout (%s) is not below the task timeout (%s): the attempt times out before the read does", key, t.ReadTimeout, t.Timeout))
	}
}

func (c *Config) validateTracing(v *checker) {
	t := c.Tracing
	if t.SampleRatio < 0 || t.SampleRatio > 1 || math.IsNaN(t.SampleRatio) {
		v.bad("tracing.sample_ratio", "must be in 0..1 (the fraction of traces recorded), got %v", t.SampleRatio)
	}
	if strings.TrimSpace(t.ServiceName) == "" {
		v.bad("tracing.service_name", "must not be empty")
	}
	if !t.Enabled() {
		return
	}
	ep := t.OTLPEndpoint
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.RawQuery != "" || u.Fragment != "":
			v.bad("tracing.otlp_endpoint", "must be host:port such as 127.0.0.1:4318 or an http(s) URL such as http://127.0.0.1:4318, got %q", ep)
		case t.Insecure && u.Scheme == "https":
			v.bad("tracing.insecure", "is true but tracing.otlp_endpoint %q is an https URL: use http:// for plain HTTP, or drop insecure", ep)
		case u.Port() != "" && !validPort(u.Port()):
			v.bad("tracing.otlp_endpoint", "invalid port in %q", ep)
		}
		return
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil || host == "" || !validPort(port) {
		v.bad("tracing.otlp_endpoint", "must be host:port such as 127.0.0.1:4318 or an http(s) URL such as http://127.0.0.1:4318, got %q", ep)
	}
}

func (c *Config) validateRedis(v *checker) {
	r := c.Redis
	if r.GateTTL.D() < time.Millisecond {
		v.bad("redis.gate_ttl", "must be at least 1ms, got %q", r.GateTTL)
	}
	v.positive("redis.timeout", r.Timeout)
	v.positive("redis.wait", r.Wait)
	if r.Prefix == "" {
		v.bad("redis.prefix", "must not be empty")
	}
	if !r.Enabled() {
		return
	}
	if _, err := redis.ParseURL(r.URL); err != nil {
		v.bad("redis.url", "must be a URL such as redis://127.0.0.1:6379/0: %v", strings.ReplaceAll(err.Error(), r.URL, RedactDSN(r.URL)))
	}
}

// validPort reports whether s is a port number, 1..65535.
func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}

// IsLoopback reports whether host (of a listen address) only accepts
// connections from this machine.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var dsnPassword = regexp.MustCompile(`^([a-z]+://[^:/@]*):[^@]*@`)

// RedactDSN hides the password of a database URL.
func RedactDSN(dsn string) string { return dsnPassword.ReplaceAllString(dsn, "${1}:xxxxx@") }

func (c *Config) validateAlerts(v *checker) {
	a := &c.Alerts
	// The rules PATCH /v1/alerts/rules applies (keel.AlertRules.Validate).
	check.Alerts(check.AlertRules{DeadPerHour: a.DeadPerHour, OldestReadyAge: a.OldestReadyAge.D(), FailureRatio: a.FailureRatio,
		FailureMinAttempts: a.FailureMinAttempts, FailureWindow: a.FailureWindow.D()}, func(field, problem string) {
		v.bad("alerts."+field, "%s", problem)
	})
	v.positive("alerts.interval", a.Interval)
	v.positive("alerts.retry_max", a.RetryMax)
	seen := map[string]bool{"log": true}
	for i := range a.Webhooks {
		w := &a.Webhooks[i]
		key := fmt.Sprintf("alerts.webhooks[%d]", i)
		if w.Name == "" {
			w.Name = "webhook"
			for n := 2; seen[w.Name]; n++ {
				w.Name = fmt.Sprintf("webhook-%d", n)
			}
		}
		switch {
		case !alerts.ValidNotifierName(w.Name): // as keel.NewClient checks a notifier's name
			v.bad(key+".name", "must be 1-64 of a-z, 0-9, '_' and '-', got %q", w.Name)
		case seen[w.Name]:
			v.bad(key+".name", "%q is used twice (\"log\" is keel's own)", w.Name)
		}
		seen[w.Name] = true
		if u, err := url.Parse(w.URL); err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.bad(key+".url", "must be an absolute http(s) URL, got %q", w.URL)
		}
		for _, h := range slices.Sorted(maps.Keys(w.Headers)) {
			if !headerPattern.MatchString(h) {
				v.bad(key+".headers", "invalid header name %q", h)
			}
			if strings.ContainsAny(w.Headers[h], "\r\n\x00") {
				v.bad(key+".headers."+h, "must not contain line breaks")
			}
		}
	}
}

// KeelSchedule returns the [[schedules]] block as the library takes it.
func (s Schedule) KeelSchedule() keel.Schedule {
	return keel.Schedule{Name: s.Name, Spec: s.Spec, TimeZone: s.TimeZone, Type: s.Type, Queue: s.Queue,
		Payload: s.Payload, Priority: s.Priority, Missed: keel.MissedPolicy(s.Missed)}
}

func (c *Config) validateSchedules(v *checker) {
	seen := map[string]int{}
	for i, s := range c.Schedules {
		key := fmt.Sprintf("schedules[%d]", i)
		if j, ok := seen[s.Name]; ok && s.Name != "" {
			v.bad(key+".name", "%q is also the name of schedules[%d]", s.Name, j)
		}
		seen[s.Name] = i
		if err := s.KeelSchedule().Validate(); err != nil {
			v.bad(key, "%s", strings.TrimPrefix(err.Error(), keel.ErrInvalid.Error()+": "))
		}
	}
}

// validateLimits checks a type's cluster-wide limits and ramp.
func validateLimits(v *checker, key string, t Type) {
	validateRate(v, key, t.Concurrency, t.Rate, t.Burst)
	r := t.Ramp
	if r == nil {
		return
	}
	if t.Concurrency != 0 {
		v.bad(key+".concurrency", "cannot be set with a ramp, which sets the concurrency itself")
	}
	if len(r.Steps) == 0 || len(r.Steps) > 100 {
		v.bad(key+".ramp.steps", "needs 1..100 rising concurrencies, got %d", len(r.Steps))
	}
	for i, s := range r.Steps {
		if s < 1 || s > 10000 || (i > 0 && s <= r.Steps[i-1]) {
			v.bad(key+".ramp.steps", "must rise, each in 1..10000, got %v", r.Steps)
			break
		}
	}
	if r.Every != 0 && (r.Every.D() < time.Second || r.Every.D() > 7*24*time.Hour) {
		v.bad(key+".ramp.every", "must be in 1s..168h, got %q", r.Every)
	}
	if math.IsNaN(r.MaxFailureRatio) || r.MaxFailureRatio < 0 || r.MaxFailureRatio > 1 {
		v.bad(key+".ramp.max_failure_ratio", "must be in 0..1, got %v", r.MaxFailureRatio)
	}
	if r.MinAttempts < 0 || r.MinAttempts > 1_000_000 {
		v.bad(key+".ramp.min_attempts", "must be in 1..1000000, got %d", r.MinAttempts)
	}
}

// validateRate checks a queue's or a type's cluster-wide concurrency, rate
// and burst.
func validateRate(v *checker, key string, concurrency int, rate float64, burst int) {
	if concurrency < 0 || concurrency > 10000 {
		v.bad(key+".concurrency", "must be in 0..10000, got %d", concurrency)
	}
	if math.IsNaN(rate) || rate < 0 || rate > 1_000_000 {
		v.bad(key+".rate", "must be a number of task starts per second in 0..1000000, got %v", rate)
	}
	if burst < 0 || burst > 1_000_000 {
		v.bad(key+".burst", "must be in 0..1000000, got %d", burst)
	}
}
