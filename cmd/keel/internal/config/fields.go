package config

import (
	"fmt"
	"strconv"
)

// Source says where a value came from.
type Source string

// Sources, from weakest to strongest.
const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// Field is one scalar setting: its key in the file (and for --set) and its
// environment variable.
type Field struct {
	Key string // "engine.timeout"
	Env string // "KEEL_ENGINE_TIMEOUT"
	ptr func(*Config) any
}

// fields lists every scalar setting in file order. A test checks that every
// scalar field of Config is here.
var fields = []Field{
	{"listen", "KEEL_LISTEN", func(c *Config) any { return &c.Listen }},
	{"shutdown_timeout", "KEEL_SHUTDOWN_TIMEOUT", func(c *Config) any { return &c.ShutdownTimeout }},
	{"any_type", "KEEL_ANY_TYPE", func(c *Config) any { return &c.AnyType }},

	{"database.dsn", "KEEL_DSN", func(c *Config) any { return &c.Database.DSN }},
	{"database.db", "KEEL_DB", func(c *Config) any { return &c.Database.DB }},
	{"database.schema", "KEEL_SCHEMA", func(c *Config) any { return &c.Database.Schema }},

	{"http.read_header_timeout", "KEEL_HTTP_READ_HEADER_TIMEOUT", func(c *Config) any { return &c.HTTP.ReadHeaderTimeout }},
	{"http.read_timeout", "KEEL_HTTP_READ_TIMEOUT", func(c *Config) any { return &c.HTTP.ReadTimeout }},
	{"http.write_timeout", "KEEL_HTTP_WRITE_TIMEOUT", func(c *Config) any { return &c.HTTP.WriteTimeout }},
	{"http.idle_timeout", "KEEL_HTTP_IDLE_TIMEOUT", func(c *Config) any { return &c.HTTP.IdleTimeout }},
	{"http.max_body_bytes", "KEEL_HTTP_MAX_BODY_BYTES", func(c *Config) any { return &c.HTTP.MaxBodyBytes }},
	{"http.max_batch", "KEEL_HTTP_MAX_BATCH", func(c *Config) any { return &c.HTTP.MaxBatch }},
	{"http.dashboard", "KEEL_HTTP_DASHBOARD", func(c *Config) any { return &c.HTTP.Dashboard }},

	{"engine.max_attempts", "KEEL_ENGINE_MAX_ATTEMPTS", func(c *Config) any { return &c.Engine.MaxAttempts }},
	{"engine.timeout", "KEEL_ENGINE_TIMEOUT", func(c *Config) any { return &c.Engine.Timeout }},
	{"engine.backoff_base", "KEEL_ENGINE_BACKOFF_BASE", func(c *Config) any { return &c.Engine.BackoffBase }},
	{"engine.backoff_max", "KEEL_ENGINE_BACKOFF_MAX", func(c *Config) any { return &c.Engine.BackoffMax }},
	{"engine.backoff_jitter", "KEEL_ENGINE_BACKOFF_JITTER", func(c *Config) any { return &c.Engine.BackoffJitter }},
	{"engine.lease_ttl", "KEEL_ENGINE_LEASE_TTL", func(c *Config) any { return &c.Engine.LeaseTTL }},
	{"engine.heartbeat_interval", "KEEL_ENGINE_HEARTBEAT_INTERVAL", func(c *Config) any { return &c.Engine.HeartbeatInterval }},
	{"engine.poll_interval", "KEEL_ENGINE_POLL_INTERVAL", func(c *Config) any { return &c.Engine.PollInterval }},
	{"engine.rescue_interval", "KEEL_ENGINE_RESCUE_INTERVAL", func(c *Config) any { return &c.Engine.RescueInterval }},
	{"engine.reconcile_interval", "KEEL_ENGINE_RECONCILE_INTERVAL", func(c *Config) any { return &c.Engine.ReconcileInterval }},
	{"engine.maintain_interval", "KEEL_ENGINE_MAINTAIN_INTERVAL", func(c *Config) any { return &c.Engine.MaintainInterval }},
	{"engine.history_retention", "KEEL_ENGINE_HISTORY_RETENTION", func(c *Config) any { return &c.Engine.HistoryRetention }},
	{"engine.settings_interval", "KEEL_ENGINE_SETTINGS_INTERVAL", func(c *Config) any { return &c.Engine.SettingsInterval }},
	{"engine.claim_batch", "KEEL_ENGINE_CLAIM_BATCH", func(c *Config) any { return &c.Engine.ClaimBatch }},
	{"engine.timeout_grace", "KEEL_ENGINE_TIMEOUT_GRACE", func(c *Config) any { return &c.Engine.TimeoutGrace }},
	{"engine.max_payload_bytes", "KEEL_ENGINE_MAX_PAYLOAD_BYTES", func(c *Config) any { return &c.Engine.MaxPayloadBytes }},
	{"engine.node", "KEEL_ENGINE_NODE", func(c *Config) any { return &c.Engine.Node }},

	{"retention.dead", "KEEL_RETENTION_DEAD", func(c *Config) any { return &c.Retention.Dead }},
	{"retention.succeeded", "KEEL_RETENTION_SUCCEEDED", func(c *Config) any { return &c.Retention.Succeeded }},
	{"retention.archive", "KEEL_RETENTION_ARCHIVE", func(c *Config) any { return &c.Retention.Archive }},
	{"retention.interval", "KEEL_RETENTION_INTERVAL", func(c *Config) any { return &c.Retention.Interval }},

	{"log.level", "KEEL_LOG_LEVEL", func(c *Config) any { return &c.Log.Level }},
	{"log.format", "KEEL_LOG_FORMAT", func(c *Config) any { return &c.Log.Format }},

	{"tracing.otlp_endpoint", "KEEL_TRACING_OTLP_ENDPOINT", func(c *Config) any { return &c.Tracing.OTLPEndpoint }},
	{"tracing.insecure", "KEEL_TRACING_INSECURE", func(c *Config) any { return &c.Tracing.Insecure }},
	{"tracing.service_name", "KEEL_TRACING_SERVICE_NAME", func(c *Config) any { return &c.Tracing.ServiceName }},
	{"tracing.sample_ratio", "KEEL_TRACING_SAMPLE_RATIO", func(c *Config) any { return &c.Tracing.SampleRatio }},
	{"metrics.listen", "KEEL_METRICS_LISTEN", func(c *Config) any { return &c.Metrics.Listen }},

	{"redis.url", "KEEL_REDIS_URL", func(c *Config) any { return &c.Redis.URL }},
	{"redis.prefix", "KEEL_REDIS_PREFIX", func(c *Config) any { return &c.Redis.Prefix }},
	{"redis.gate_ttl", "KEEL_REDIS_GATE_TTL", func(c *Config) any { return &c.Redis.GateTTL }},
	{"redis.timeout", "KEEL_REDIS_TIMEOUT", func(c *Config) any { return &c.Redis.Timeout }},
	{"redis.wait", "KEEL_REDIS_WAIT", func(c *Config) any { return &c.Redis.Wait }},

	{"alerts.dead_per_hour", "KEEL_ALERTS_DEAD_PER_HOUR", func(c *Config) any { return &c.Alerts.DeadPerHour }},
	{"alerts.oldest_ready_age", "KEEL_ALERTS_OLDEST_READY_AGE", func(c *Config) any { return &c.Alerts.OldestReadyAge }},
	{"alerts.failure_ratio", "KEEL_ALERTS_FAILURE_RATIO", func(c *Config) any { return &c.Alerts.FailureRatio }},
	{"alerts.failure_min_attempts", "KEEL_ALERTS_FAILURE_MIN_ATTEMPTS", func(c *Config) any { return &c.Alerts.FailureMinAttempts }},
	{"alerts.failure_window", "KEEL_ALERTS_FAILURE_WINDOW", func(c *Config) any { return &c.Alerts.FailureWindow }},
	{"alerts.no_live_worker", "KEEL_ALERTS_NO_LIVE_WORKER", func(c *Config) any { return &c.Alerts.NoLiveWorker }},
	{"alerts.node_lost", "KEEL_ALERTS_NODE_LOST", func(c *Config) any { return &c.Alerts.NodeLost }},
	{"alerts.interval", "KEEL_ALERTS_INTERVAL", func(c *Config) any { return &c.Alerts.Interval }},
	{"alerts.retry_max", "KEEL_ALERTS_RETRY_MAX", func(c *Config) any { return &c.Alerts.RetryMax }},
	{"alerts.off", "KEEL_ALERTS_OFF", func(c *Config) any { return &c.Alerts.Off }},
}

// envPrefixes are the prefixes under which every variable must be a known
// one, so that a misspelt KEEL_ENGINE_TIMOUT is an error.
var envPrefixes = []string{"KEEL_HTTP_", "KEEL_ENGINE_", "KEEL_RETENTION_", "KEEL_LOG_", "KEEL_DATABASE_", "KEEL_TRACING_", "KEEL_METRICS_", "KEEL_REDIS_", "KEEL_ALERTS_"}

// Fields returns every scalar setting in file order.
func Fields() []Field { return append([]Field(nil), fields...) }

func lookupField(key string) (Field, bool) {
	for _, f := range fields {
		if f.Key == key {
			return f, true
		}
	}
	return Field{}, false
}

// set parses raw into f's field of c.
func (f Field) set(c *Config, raw string) error {
	switch p := f.ptr(c).(type) {
	case *string:
		*p = raw
	case *int:
		v, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("invalid integer %q", raw)
		}
		*p = v
	case *int64:
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid integer %q", raw)
		}
		*p = v
	case *float64:
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("invalid number %q", raw)
		}
		*p = v
	case *bool:
		v, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("invalid boolean %q: use true or false", raw)
		}
		*p = v
	case *Duration:
		v, err := parseSetting(raw)
		if err != nil {
			return err
		}
		*p = v
	default:
		panic(fmt.Sprintf("config: field %s has unsupported type %T", f.Key, p))
	}
	return nil
}

// format returns f's value in c as a string.
func (f Field) format(c *Config) string {
	switch p := f.ptr(c).(type) {
	case *string:
		return *p
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *bool:
		return strconv.FormatBool(*p)
	case *Duration:
		return p.String()
	}
	panic(fmt.Sprintf("config: field %s has unsupported type", f.Key))
}

// Value is one effective setting as `keel config check` shows it.
type Value struct {
	Key    string `json:"key"`
	Value  string `json:"value"` // secrets redacted
	Source Source `json:"source"`
	Env    string `json:"env,omitempty"` // the variable that sets it, if any
	Note   string `json:"note,omitempty"`
}

// Source returns where the value of key came from.
func (c *Config) Source(key string) Source {
	if s, ok := c.sources[key]; ok {
		return s
	}
	return SourceDefault
}
