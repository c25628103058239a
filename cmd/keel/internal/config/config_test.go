package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// write puts a keel.toml with body in a new directory and returns its path.
func write(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keel.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, o Options) *Config {
	t.Helper()
	c, err := Load(o)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func value(t *testing.T, c *Config, key string) Value {
	t.Helper()
	for _, v := range c.Values() {
		if v.Key == key {
			return v
		}
	}
	t.Fatalf("no value %s", key)
	return Value{}
}

func TestDefaults(t *testing.T) {
	t.Chdir(t.TempDir()) // no keel.toml here
	c := load(t, Options{})
	if c.File != "" {
		t.Fatalf("read a file: %s", c.File)
	}
	want := map[string]string{
		"listen": "127.0.0.1:7400", "shutdown_timeout": "30s", "any_type": "false",
		"database.dsn": "", "database.db": "./keel.db", "database.schema": "keel",
		"http.read_header_timeout": "5s", "http.read_timeout": "30s", "http.write_timeout": "30s",
		"http.idle_timeout": "2m", "http.max_body_bytes": "1114112", "http.max_batch": "1000", "http.dashboard": "true",
		"engine.max_attempts": "4", "engine.timeout": "1m", "engine.backoff_base": "30s",
		"engine.backoff_max": "1h", "engine.backoff_jitter": "0.2", "engine.lease_ttl": "30s",
		"engine.heartbeat_interval": "10s", "engine.poll_interval": "1s", "engine.rescue_interval": "10s",
		"engine.reconcile_interval": "5m", "engine.maintain_interval": "1m", "engine.history_retention": "8d",
		"engine.settings_interval": "2s", "engine.claim_batch": "100", "engine.timeout_grace": "5s",
		"engine.max_payload_bytes": "1048576", "engine.node": "",
		"retention.dead": "30d", "retention.succeeded": "30d", "retention.archive": "0s", "retention.interval": "1m",
		"log.level": "info", "log.format": "text", "metrics.listen": "",
		"tracing.otlp_endpoint": "", "tracing.insecure": "false", "tracing.service_name": "keel", "tracing.sample_ratio": "1",
		"redis.url": "", "redis.prefix": "keel:gate:", "redis.gate_ttl": "10s", "redis.timeout": "50ms", "redis.wait": "500ms",
		"alerts.dead_per_hour": "3", "alerts.oldest_ready_age": "10m", "alerts.failure_ratio": "0.5",
		"alerts.failure_min_attempts": "20", "alerts.failure_window": "5m", "alerts.no_live_worker": "true",
		"alerts.node_lost": "true", "alerts.interval": "15s", "alerts.retry_max": "5m", "alerts.off": "false",
		"queues.default.workers": "10",
	}
	for key, w := range want {
		v := value(t, c, key)
		if v.Value != w || v.Source != SourceDefault {
			t.Errorf("%s = %q (%s), want %q (default)", key, v.Value, v.Source, w)
		}
	}
	if len(fields) != len(want)-1 {
		t.Errorf("%d scalar fields, the test knows %d: add the new one here", len(fields), len(want)-1)
	}
	if len(c.Tokens) != 0 || len(c.Types) != 0 {
		t.Fatalf("tokens %v types %v by default", c.Tokens, c.Types)
	}
}

// TestEveryFieldListed: every scalar field of Config and its sections has
// a key and a KEEL_* variable.
func TestEveryFieldListed(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range fields {
		listed[f.Key] = true
		want := "KEEL_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(f.Key))
		if f.Env != want && !strings.HasPrefix(f.Key, "database.") {
			t.Errorf("%s: env %s, want %s", f.Key, f.Env, want)
		}
	}
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			sf := typ.Field(i)
			tag := sf.Tag.Get("toml")
			if tag == "" || tag == "-" {
				continue
			}
			switch sf.Type.Kind() {
			case reflect.Struct:
				walk(prefix+tag+".", sf.Type)
			case reflect.Map, reflect.Slice:
			default:
				if !listed[prefix+tag] {
					t.Errorf("field %s%s is not in fields", prefix, tag)
				}
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
}

// TestSeedParameters: every parameter of seed 000 §3.1's table and of
// DESIGN.md's defaults has a setting.
func TestSeedParameters(t *testing.T) {
	path := write(t, `
[queues.default]
workers = 2
[types.hook]
url = "http://127.0.0.1:9/hook"
`)
	c := load(t, Options{Path: path})
	for _, key := range []string{
		"types.hook.connect_timeout",  // 连接超时 1~3s
		"types.hook.read_timeout",     // 读取超时 5~10s
		"engine.max_attempts",         // 最大重试次数 1~3
		"engine.backoff_base",         // 指数退避基数
		"engine.backoff_jitter",       // 随机抖动
		"queues.default.workers",      // 消费者并发数
		"engine.claim_batch",          // 单批拉取条数 10~100
		"retention.dead",              // 死信保留 7 天以上
		"retention.succeeded",         // DESIGN: succeeded kept, then archived
		"engine.timeout",              // DESIGN: task timeout
		"engine.lease_ttl",            // DESIGN: lease
		"engine.heartbeat_interval",   // DESIGN: heartbeat
		"engine.poll_interval",        // DESIGN: poll interval
		"engine.backoff_max",          // DESIGN: backoff cap
		"engine.max_payload_bytes",    // DESIGN: payload limit
		"types.hook.max_result_bytes", // HTTP target answers
	} {
		value(t, c, key)
	}
	if h := c.Types["hook"]; h.ConnectTimeout.D() != 2*time.Second || h.ReadTimeout.D() != 10*time.Second {
		t.Fatalf("target timeouts %v / %v, want 2s / 10s", h.ConnectTimeout, h.ReadTimeout)
	}
}

const fullFile = `
listen = "127.0.0.1:8000"
shutdown_timeout = "10s"
any_type = true

[database]
dsn = "postgres://keel:secret@db.example:5432/keel"
schema = "jobs"

[redis]
url = "redis://:secret@cache.example:6379/1"
gate_ttl = "1m"

[[tokens]]
token = "0123456789abcdef-admin"
role = "admin"

[[tokens]]
token_env = "READER_TOKEN"
role = "read"

[http]
read_header_timeout = "2s"
read_timeout = "20s"
write_timeout = "25s"
idle_timeout = "1m"
max_body_bytes = 2097152
max_batch = 500
dashboard = false

[engine]
max_attempts = 3
timeout = "2m"
backoff_base = "500ms"
backoff_max = "10m"
backoff_jitter = 0
lease_ttl = "20s"
heartbeat_interval = "5s"
poll_interval = "250ms"
rescue_interval = "5s"
settings_interval = "1s"
claim_batch = 50
timeout_grace = "2s"
max_payload_bytes = 65536
node = "worker-1"

[retention]
dead = "14d"
succeeded = "3d"
archive = "90d"
interval = "30s"

[log]
level = "debug"
format = "json"

[queues.mail]
workers = 2

[types.email]
url = "https://mailer.example/send"
connect_timeout = "1s"
read_timeout = "5s"
max_result_bytes = 4096
headers = { "X-Tenant" = "acme" }
headers_env = { "Authorization" = "MAILER_AUTH" }
queue = "mail"
priority = 5
max_attempts = 2
timeout = "30s"
backoff_base = "1s"
backoff_max = "1m"

[types.report]
queue = "reports"
priority = -1
`

// TestQueuePrefetch: an omitted prefetch is workers/4, prefetch = 0 turns
// it off, and both show in the values with their source.
func TestQueuePrefetch(t *testing.T) {
	c := load(t, Options{Path: write(t, "[queues.a]\nworkers = 10\n[queues.b]\nworkers = 10\nprefetch = 0\n[queues.c]\nworkers = 3\n[queues.d]\nworkers = 8\nprefetch = 32\n")})
	for name, want := range map[string]int{"a": 2, "b": 0, "c": 0, "d": 32} {
		if got := c.Queues[name].Prefetch; got != want {
			t.Errorf("queue %s: prefetch %d, want %d", name, got, want)
		}
	}
	if d := load(t, Options{}); d.Queues[DefaultQueue].Prefetch != 2 {
		t.Errorf("default queue: prefetch %d, want 2", d.Queues[DefaultQueue].Prefetch)
	}
	got := map[string]Value{}
	for _, v := range c.Values() {
		got[v.Key] = v
	}
	if v := got["queues.a.prefetch"]; v.Value != "2" || v.Source != SourceDefault {
		t.Errorf("queues.a.prefetch: %+v, want 2 from the default", v)
	}
	if v := got["queues.b.prefetch"]; v.Value != "0" || v.Source != SourceFile || v.Note != "off" {
		t.Errorf("queues.b.prefetch: %+v, want 0 from the file, off", v)
	}
}

func TestFile(t *testing.T) {
	env := []string{"READER_TOKEN=fedcba9876543210-read", "MAILER_AUTH=Bearer s3cret"}
	c := load(t, Options{Path: write(t, fullFile), Environ: env})
	if c.Listen != "127.0.0.1:8000" || c.ShutdownTimeout.D() != 10*time.Second || !c.AnyType {
		t.Fatalf("listen %q shutdown %v", c.Listen, c.ShutdownTimeout)
	}
	if c.Database.Schema != "jobs" || !strings.HasPrefix(c.Database.DSN, "postgres://") {
		t.Fatalf("database %+v", c.Database)
	}
	if len(c.Tokens) != 2 || c.Tokens[1].Token != "fedcba9876543210-read" || c.Tokens[1].Role != RoleRead {
		t.Fatalf("tokens %+v", c.Tokens)
	}
	wantEngine := Engine{
		MaxAttempts: 3, Timeout: Duration(2 * time.Minute), BackoffBase: Duration(500 * time.Millisecond),
		BackoffMax: Duration(10 * time.Minute), BackoffJitter: 0, LeaseTTL: Duration(20 * time.Second),
		HeartbeatInterval: Duration(5 * time.Second), PollInterval: Duration(250 * time.Millisecond),
		RescueInterval: Duration(5 * time.Second), ReconcileInterval: Duration(5 * time.Minute), MaintainInterval: Duration(time.Minute),
		HistoryRetention: Duration(8 * 24 * time.Hour), SettingsInterval: Duration(time.Second), ClaimBatch: 50,
		TimeoutGrace: Duration(2 * time.Second), MaxPayloadBytes: 65536, Node: "worker-1",
	}
	if c.Engine != wantEngine {
		t.Fatalf("engine\n got %+v\nwant %+v", c.Engine, wantEngine)
	}
	if c.HTTP != (HTTP{Duration(2 * time.Second), Duration(20 * time.Second), Duration(25 * time.Second), Duration(time.Minute), 2 << 20, 500, false}) {
		t.Fatalf("http %+v", c.HTTP)
	}
	wantRetention := Retention{Dead: Duration(14 * 24 * time.Hour), Succeeded: Duration(3 * 24 * time.Hour),
		Archive: Duration(90 * 24 * time.Hour), Interval: Duration(30 * time.Second)}
	if c.Retention != wantRetention || c.Log != (Log{"debug", "json"}) {
		t.Fatalf("retention %+v log %+v", c.Retention, c.Log)
	}
	if _, ok := c.Queues[DefaultQueue]; ok || c.Queues["mail"].Workers != 2 {
		t.Fatalf("queues %+v: the file's [queues] replace the default", c.Queues)
	}
	email := c.Types["email"]
	if email.Headers["Authorization"] != "Bearer s3cret" || email.Headers["X-Tenant"] != "acme" || email.MaxResultBytes != 4096 {
		t.Fatalf("email %+v", email)
	}
	report := c.Types["report"]
	if report.IsTarget() || report.Queue != "reports" || report.MaxAttempts != 3 || report.Timeout.D() != 2*time.Minute {
		t.Fatalf("report %+v: enqueue-only types take the engine's defaults", report)
	}
	for _, v := range c.Values() {
		if strings.Contains(v.Value, "secret") || strings.Contains(v.Value, "s3cret") || strings.Contains(v.Value, "0123456789abcdef") {
			t.Errorf("%s shows a secret: %q", v.Key, v.Value)
		}
		if v.Key == "engine.timeout" && v.Source != SourceFile {
			t.Errorf("engine.timeout source %s", v.Source)
		}
	}
	if v := value(t, c, "redis.url"); v.Value != "redis://:xxxxx@cache.example:6379/1" {
		t.Errorf("redis.url shown as %q", v.Value)
	}
	if v := value(t, c, "database.dsn"); v.Value != "postgres://keel:xxxxx@db.example:5432/keel" {
		t.Errorf("dsn shown as %q", v.Value)
	}
	if v := value(t, c, "types.report.max_attempts"); v.Source != SourceDefault || v.Value != "3" {
		t.Errorf("report max_attempts %+v", v)
	}
}

func TestEnvOverFileAndFlagsOverEnv(t *testing.T) {
	path := write(t, `
listen = "127.0.0.1:8000"
[database]
db = "file.db"
[engine]
timeout = "2m"
max_attempts = 3
[http]
read_timeout = "20s"
`)
	env := []string{
		"KEEL_LISTEN=127.0.0.1:8001", "KEEL_DB=env.db", "KEEL_ENGINE_TIMEOUT=3m",
		"KEEL_HTTP_READ_TIMEOUT=21s", "KEEL_ENGINE_BACKOFF_JITTER=0.1", "KEEL_RETENTION_DEAD=8d",
		"KEEL_TOKEN=0123456789abcdef0123", "KEEL_LOG_LEVEL=warn", "KEEL_SCHEMA=", // empty: unset
		"OTHER=1",
	}
	c := load(t, Options{Path: path, Environ: env})
	for key, want := range map[string]struct {
		value  string
		source Source
	}{
		"listen": {"127.0.0.1:8001", SourceEnv}, "database.db": {"env.db", SourceEnv},
		"engine.timeout": {"3m", SourceEnv}, "engine.max_attempts": {"3", SourceFile},
		"http.read_timeout": {"21s", SourceEnv}, "engine.backoff_jitter": {"0.1", SourceEnv},
		"retention.dead": {"8d", SourceEnv}, "log.level": {"warn", SourceEnv},
		"database.schema": {"keel", SourceDefault}, "http.write_timeout": {"30s", SourceDefault},
	} {
		if v := value(t, c, key); v.Value != want.value || v.Source != want.source {
			t.Errorf("%s = %q (%s), want %q (%s)", key, v.Value, v.Source, want.value, want.source)
		}
	}
	if len(c.Tokens) != 1 || c.Tokens[0].Role != RoleAdmin || value(t, c, "tokens[0]").Source != SourceEnv {
		t.Fatalf("KEEL_TOKEN: %+v", c.Tokens)
	}

	c = load(t, Options{Path: path, Environ: env, Flags: []Flag{
		{"--listen", "listen", "127.0.0.1:8002"}, {"--db", "database.db", "flag.db"},
		{"--set", "engine.timeout", "4m"},
	}})
	for key, want := range map[string]string{"listen": "127.0.0.1:8002", "database.db": "flag.db", "engine.timeout": "4m"} {
		if v := value(t, c, key); v.Value != want || v.Source != SourceFlag {
			t.Errorf("%s = %q (%s), want %q (flag)", key, v.Value, v.Source, want)
		}
	}
}

func TestConfigFileFromEnv(t *testing.T) {
	path := write(t, `listen = "127.0.0.1:9000"`)
	c := load(t, Options{Environ: []string{"KEEL_CONFIG=" + path}})
	if c.File != path || c.Listen != "127.0.0.1:9000" {
		t.Fatalf("KEEL_CONFIG not read: file %q listen %q", c.File, c.Listen)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("keel.toml", []byte(`listen = "127.0.0.1:9001"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := load(t, Options{}); c.Listen != "127.0.0.1:9001" || c.File != DefaultPath {
		t.Fatalf("./keel.toml not read: %q", c.Listen)
	}
	if _, err := Load(Options{Path: filepath.Join(dir, "missing.toml")}); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Fatalf("missing explicit file: %v", err)
	}
}

func TestTargetTypeInheritsEngine(t *testing.T) {
	path := write(t, `
[engine]
backoff_base = "2h"
[types.hook]
url = "http://127.0.0.1:9/"
`)
	c := load(t, Options{Path: path, Environ: []string{"KEEL_ENGINE_MAX_ATTEMPTS=7", "KEEL_ENGINE_BACKOFF_MAX=3h"}})
	h := c.Types["hook"]
	if h.MaxAttempts != 7 || h.BackoffBase.D() != 2*time.Hour || h.BackoffMax.D() != 3*time.Hour || h.Queue != DefaultQueue {
		t.Fatalf("hook %+v", h)
	}
	if _, ok := c.WorkedQueues()[DefaultQueue]; !ok {
		t.Fatalf("worked queues %v", c.WorkedQueues())
	}
}

// TestErrors: each bad setting fails Load with an error naming the setting
// and the bad value.
func TestErrors(t *testing.T) {
	target := "[types.hook]\nurl = \"http://127.0.0.1:9/\"\n"
	cases := []struct {
		name string
		file string
		env  []string
		flag []Flag
		want string
	}{
		{"unknown key", "[engine]\ntimout = \"1s\"", nil, nil, "unknown key engine.timout"},
		{"unknown type key", "[types.a]\nurll = \"x\"", nil, nil, "unknown key types.a.urll"},
		{"negative concurrency", "[types.a]\nconcurrency = -1", nil, nil, "types.a.concurrency: must be in 0..10000, got -1"},
		{"nan rate", "[types.a]\nrate = nan", nil, nil, "types.a.rate: must be a number of task starts per second in 0..1000000, got NaN"},
		{"negative rate", "[types.a]\nrate = -2.5", nil, nil, "types.a.rate: must be a number"},
		{"negative burst", "[types.a]\nburst = -1", nil, nil, "types.a.burst: must be in 0..1000000, got -1"},
		{"queue concurrency", "[queues.q]\nconcurrency = 10001", nil, nil, "queues.q.concurrency: must be in 0..10000, got 10001"},
		{"queue rate", "[queues.q]\nrate = inf", nil, nil, "queues.q.rate: must be a number of task starts per second in 0..1000000, got +Inf"},
		{"queue burst", "[queues.q]\nburst = -3", nil, nil, "queues.q.burst: must be in 0..1000000, got -3"},
		{"ramp steps", "[types.a.ramp]\nsteps = [2, 1]", nil, nil, "types.a.ramp.steps: must rise"},
		{"ramp no steps", "[types.a.ramp]\nevery = \"1m\"", nil, nil, "types.a.ramp.steps: needs 1..100 rising concurrencies, got 0"},
		{"ramp every", "[types.a.ramp]\nsteps = [1, 2]\nevery = \"10ms\"", nil, nil, "types.a.ramp.every: must be in 1s..168h"},
		{"ramp ratio", "[types.a.ramp]\nsteps = [1, 2]\nmax_failure_ratio = 1.5", nil, nil, "types.a.ramp.max_failure_ratio: must be in 0..1, got 1.5"},
		{"ramp with concurrency", "[types.a]\nconcurrency = 2\n[types.a.ramp]\nsteps = [1, 2]", nil, nil, "types.a.concurrency: cannot be set with a ramp"},
		{"unknown section", "[server]\nport = 1", nil, nil, "unknown key server"},
		{"toml syntax", "listen = ", nil, nil, "keel.toml: toml:"},
		{"wrong type", "[engine]\nmax_attempts = \"four\"", nil, nil, "max_attempts"},
		{"bare number duration", "[engine]\ntimeout = 30", nil, nil, `duration must be a string such as "30s"`},
		{"bad duration", "[engine]\ntimeout = \"30 seconds\"", nil, nil, `invalid duration "30 seconds"`},
		{"bad env duration", "", []string{"KEEL_ENGINE_TIMEOUT=soon"}, nil, `KEEL_ENGINE_TIMEOUT: invalid duration "soon"`},
		{"bad env int", "", []string{"KEEL_ENGINE_MAX_ATTEMPTS=4.5"}, nil, `KEEL_ENGINE_MAX_ATTEMPTS: invalid integer "4.5"`},
		{"bad env float", "", []string{"KEEL_ENGINE_BACKOFF_JITTER=lots"}, nil, `KEEL_ENGINE_BACKOFF_JITTER: invalid number "lots"`},
		{"bad env bool", "", []string{"KEEL_ANY_TYPE=maybe"}, nil, `KEEL_ANY_TYPE: invalid boolean "maybe": use true or false`},
		{"unknown env", "", []string{"KEEL_ENGINE_TIMOUT=1s"}, nil, "KEEL_ENGINE_TIMOUT: unknown setting"},
		{"bad flag", "", nil, []Flag{{"--set", "engine.timeout", "x"}}, `--set: invalid duration "x"`},
		{"unknown flag key", "", nil, []Flag{{"--set", "engine.nope", "1"}}, `--set: unknown setting "engine.nope"`},
		{"env value validated", "", []string{"KEEL_ENGINE_MAX_ATTEMPTS=0"}, nil, "engine.max_attempts (from KEEL_ENGINE_MAX_ATTEMPTS): must be in 1..1000, got 0"},
		{"flag value validated", "", nil, []Flag{{"--listen", "listen", "nope"}}, `listen (from a flag): must be host:port such as 127.0.0.1:7400, got "nope"`},
		{"listen", `listen = "7400"`, nil, nil, `listen: must be host:port`},
		{"listen port", `listen = "127.0.0.1:99999"`, nil, nil, `listen: invalid port in "127.0.0.1:99999"`},
		{"public without tokens", `listen = "0.0.0.0:7400"`, nil, nil, `listen: "0.0.0.0:7400" is not a loopback address and no tokens are configured`},
		{"all interfaces without tokens", `listen = ":7400"`, nil, nil, `is not a loopback address`},
		{"shutdown", `shutdown_timeout = "0s"`, nil, nil, `shutdown_timeout: must be positive, got "0s"`},
		{"dsn", "[database]\ndsn = \"sqlite://x\"", nil, nil, `database.dsn: must be a postgres:// or mysql:// URL`},
		{"dsn password hidden", "[database]\ndsn = \"redis://u:hunter2@h\"", nil, nil, `"redis://u:xxxxx@h"`},
		{"db", "[database]\ndb = \"\"", nil, nil, "database.db: must name the SQLite file"},
		{"schema", "[database]\ndsn = \"postgres://h/db\"\nschema = \"Bad;\"", nil, nil, `database.schema: must be 1-63 lower-case letters`},
		{"token role", "[[tokens]]\ntoken = \"0123456789abcdef\"\nrole = \"root\"", nil, nil, `tokens[0].role: must be admin, enqueue or read, got "root"`},
		{"token missing role", "[[tokens]]\ntoken = \"0123456789abcdef\"", nil, nil, `tokens[0].role: must be admin, enqueue or read, got ""`},
		{"token short", "[[tokens]]\ntoken = \"short\"\nrole = \"read\"", nil, nil, "tokens[0].token: must be at least 16 characters, got 5"},
		{"token space", "[[tokens]]\ntoken = \"0123456789 abcdef\"\nrole = \"read\"", nil, nil, "tokens[0].token: must not contain white space"},
		{"token duplicate", "[[tokens]]\ntoken = \"0123456789abcdef\"\nrole = \"read\"\n[[tokens]]\ntoken = \"0123456789abcdef\"\nrole = \"admin\"", nil, nil, "tokens[1].token: is the same token as tokens[0]"},
		{"token both", "[[tokens]]\ntoken = \"0123456789abcdef\"\ntoken_env = \"X\"\nrole = \"read\"", nil, nil, "tokens[0]: set token or token_env, not both"},
		{"token none", "[[tokens]]\nrole = \"read\"", nil, nil, "tokens[0]: set token or token_env"},
		{"token env unset", "[[tokens]]\ntoken_env = \"NOPE_TOKEN\"\nrole = \"read\"", nil, nil, "tokens[0].token_env: environment variable NOPE_TOKEN is not set"},
		{"KEEL_TOKEN short", "", []string{"KEEL_TOKEN=abc"}, nil, "KEEL_TOKEN: must be at least 16 characters"},
		{"http timeout", "[http]\nread_header_timeout = \"0s\"", nil, nil, `http.read_header_timeout: must be positive, got "0s"`},
		{"http negative", "[http]\nidle_timeout = \"-1s\"", nil, nil, `http.idle_timeout: must be positive, got "-1s"`},
		{"max body", "[http]\nmax_body_bytes = 10", nil, nil, "http.max_body_bytes: must be at least 1024, got 10"},
		{"max batch", "[http]\nmax_batch = 0", nil, nil, "http.max_batch: must be in 1..10000, got 0"},
		{"attempts", "[engine]\nmax_attempts = 1001", nil, nil, "engine.max_attempts: must be in 1..1000, got 1001"},
		{"timeout", "[engine]\ntimeout = \"0s\"", nil, nil, `engine.timeout: must be at least 1ms, got "0s"`},
		{"backoff base", "[engine]\nbackoff_base = \"0s\"", nil, nil, `engine.backoff_base: must be positive`},
		{"backoff max", "[engine]\nbackoff_max = \"1s\"", nil, nil, `engine.backoff_max: "1s" must not be below engine.backoff_base "30s"`},
		{"jitter", "[engine]\nbackoff_jitter = 1.5", nil, nil, "engine.backoff_jitter: must be in 0 (none) up to below 1, got 1.5"},
		{"jitter negative", "[engine]\nbackoff_jitter = -0.1", nil, nil, "engine.backoff_jitter: must be in 0"},
		{"lease", "[engine]\nlease_ttl = \"0s\"", nil, nil, "engine.lease_ttl: must be positive"},
		{"heartbeat", "[engine]\nheartbeat_interval = \"30s\"", nil, nil, `engine.heartbeat_interval: "30s" must be shorter than engine.lease_ttl "30s"`},
		{"poll", "[engine]\npoll_interval = \"0s\"", nil, nil, "engine.poll_interval: must be positive"},
		{"rescue", "[engine]\nrescue_interval = \"0s\"", nil, nil, "engine.rescue_interval: must be positive"},
		{"reconcile", "[engine]\nreconcile_interval = \"0s\"", nil, nil, "engine.reconcile_interval: must be positive"},
		{"maintain", "[engine]\nmaintain_interval = \"0s\"", nil, nil, "engine.maintain_interval: must be positive"},
		{"history", "[engine]\nhistory_retention = \"30m\"", nil, nil, "engine.history_retention: must be at least 1h"},
		{"settings", "[engine]\nsettings_interval = \"0s\"", nil, nil, "engine.settings_interval: must be positive"},
		{"grace", "[engine]\ntimeout_grace = \"0s\"", nil, nil, "engine.timeout_grace: must be positive"},
		{"claim batch", "[engine]\nclaim_batch = 0", nil, nil, "engine.claim_batch: must be in 1..1000, got 0"},
		{"payload", "[engine]\nmax_payload_bytes = 0", nil, nil, "engine.max_payload_bytes: must be positive, got 0"},
		{"node", "[engine]\nnode = \"a b\"", nil, nil, `engine.node: must be 1-128 letters`},
		{"dead retention", "[retention]\ndead = \"6d\"", nil, nil, `retention.dead: must be at least 7d (dead letters are kept a week or more), got "6d"`},
		{"succeeded retention", "[retention]\nsucceeded = \"0s\"", nil, nil, `retention.succeeded: must be at least 1m, got "0s"`},
		{"succeeded retention below 1m", "[retention]\nsucceeded = \"59s\"", nil, nil, `retention.succeeded: must be at least 1m, got "59s"`},
		{"archive retention", "[retention]\narchive = \"-1h\"", nil, nil, `retention.archive: must be positive`},
		{"archive interval", "[retention]\ninterval = \"0s\"", nil, nil, `retention.interval: must be positive`},
		{"log level", "[log]\nlevel = \"loud\"", nil, nil, `log.level: must be debug, info, warn or error, got "loud"`},
		{"log format", "[log]\nformat = \"xml\"", nil, nil, `log.format: must be text or json, got "xml"`},
		{"metrics listen", "[metrics]\nlisten = \"9090\"", nil, nil, `metrics.listen: must be host:port such as 127.0.0.1:9090, got "9090"`},
		{"redis url", "[redis]\nurl = \"http://127.0.0.1:6379\"", nil, nil, `redis.url: must be a URL such as redis://127.0.0.1:6379/0`},
		{"redis url env", "", []string{"KEEL_REDIS_URL=127.0.0.1:6379"}, nil, `redis.url (from KEEL_REDIS_URL): must be a URL such as redis://127.0.0.1:6379/0`},
		{"redis url db", "[redis]\nurl = \"redis://127.0.0.1:6379/x\"", nil, nil, `redis.url: must be a URL`},
		{"redis gate ttl", "[redis]\ngate_ttl = \"0s\"", nil, nil, `redis.gate_ttl: must be at least 1ms, got "0s"`},
		{"redis timeout", "[redis]\ntimeout = \"-1s\"", nil, nil, `redis.timeout: must be positive`},
		{"redis wait", "[redis]\nwait = \"0s\"", nil, nil, `redis.wait: must be positive`},
		{"redis prefix", "[redis]\nprefix = \"\"", nil, nil, `redis.prefix: must not be empty`},
		{"redis unknown env", "", []string{"KEEL_REDIS_GATE=1"}, nil, `KEEL_REDIS_GATE`},
		{"alerts dead per hour", "[alerts]\ndead_per_hour = -2", nil, nil, `alerts.dead_per_hour: must be -1 (off) or more, got -2`},
		{"alerts failure ratio", "[alerts]\nfailure_ratio = 1.5", nil, nil, `alerts.failure_ratio: must be in [0, 1)`},
		{"alerts failure window", "[alerts]\nfailure_window = \"2h\"", nil, nil, `alerts.failure_window: must be in 1m..1h (the history keeps minutes; stats read the last hour), got "2h"`},
		{"alerts interval", "[alerts]\ninterval = \"0s\"", nil, nil, `alerts.interval: must be positive`},
		{"webhook url", "[[alerts.webhooks]]\nurl = \"chat.example/hook\"", nil, nil, `alerts.webhooks[0].url: must be an absolute http(s) URL, got "chat.example/hook"`},
		{"webhook name", "[[alerts.webhooks]]\nname = \"Chat Room\"\nurl = \"http://a/\"", nil, nil, `alerts.webhooks[0].name: must be 1-64 of a-z`},
		{"webhook name twice", "[[alerts.webhooks]]\nname = \"log\"\nurl = \"http://a/\"", nil, nil, `alerts.webhooks[0].name: "log" is used twice`},
		{"webhook header env unset", "[[alerts.webhooks]]\nurl = \"http://a/\"\nheaders_env = { Authorization = \"NOPE_HOOK\" }", nil, nil, `alerts.webhooks[0].headers_env.Authorization: environment variable NOPE_HOOK is not set`},
		{"schedule name", "[[schedules]]\nname = \"a b\"\nspec = \"@hourly\"\ntype = \"t\"", nil, nil, `schedules[0]: schedule "a b": invalid name`},
		{"schedule name twice", "[[schedules]]\nname = \"s\"\nspec = \"@hourly\"\ntype = \"t\"\n[[schedules]]\nname = \"s\"\nspec = \"@daily\"\ntype = \"t\"", nil, nil, `schedules[1].name: "s" is also the name of schedules[0]`},
		// Issue 27, item 10: refused at config check, not at every trigger.
		{"schedule every 0s", "[[schedules]]\nname = \"s\"\nspec = \"@every 0s\"\ntype = \"t\"", nil, nil, `schedules[0]: schedule "s": spec "@every 0s": the interval must be at least 1s`},
		{"schedule every 1ns", "[[schedules]]\nname = \"s\"\nspec = \"@every 1ns\"\ntype = \"t\"", nil, nil, `schedules[0]: schedule "s": spec "@every 1ns": the interval must be at least 1s`},
		{"schedule every -1s", "[[schedules]]\nname = \"s\"\nspec = \"@every -1s\"\ntype = \"t\"", nil, nil, `spec "@every -1s": the interval must be at least 1s`},
		{"schedule payload NUL", "[[schedules]]\nname = \"s\"\nspec = \"@hourly\"\ntype = \"t\"\npayload = { s = \"a\\u0000b\" }", nil, nil, `schedules[0]: schedule "s": payload contains the NUL character`},
		{"schedule spec", "[[schedules]]\nname = \"s\"\nspec = \"every hour\"\ntype = \"t\"", nil, nil, `schedules[0]: schedule "s": spec "every hour"`},
		{"schedule no spec", "[[schedules]]\nname = \"s\"\ntype = \"t\"", nil, nil, `schedules[0]: schedule "s": Spec is required`},
		{"schedule zone", "[[schedules]]\nname = \"s\"\nspec = \"@hourly\"\ntype = \"t\"\ntime_zone = \"Europe/Atlantis\"", nil, nil, `schedules[0]: schedule "s": unknown time zone "Europe/Atlantis"`},
		{"schedule type", "[[schedules]]\nname = \"s\"\nspec = \"@hourly\"", nil, nil, `schedules[0]: schedule "s": invalid Type ""`},
		{"schedule reserved queue", "[[schedules]]\nname = \"s\"\nspec = \"@hourly\"\ntype = \"t\"\nqueue = \"keel\"", nil, nil, `queue "keel" is reserved`},
		{"schedule missed", "[[schedules]]\nname = \"s\"\nspec = \"@hourly\"\ntype = \"t\"\nmissed = \"all\"", nil, nil, `schedules[0]: schedule "s": Missed must be "run_once" or "skip", got "all"`},
		{"schedule unknown key", "[[schedules]]\nname = \"s\"\nspec = \"@hourly\"\ntype = \"t\"\nzone = \"UTC\"", nil, nil, `unknown key schedules.zone`},
		{"metrics listen port", "[metrics]\nlisten = \"127.0.0.1:70000\"", nil, nil, `metrics.listen: invalid port in "127.0.0.1:70000"`},
		{"metrics public without tokens", "[metrics]\nlisten = \"0.0.0.0:9090\"", nil, nil, `metrics.listen: "0.0.0.0:9090" is not a loopback address and no tokens are configured`},
		{"metrics on the API's address", "[metrics]\nlisten = \"127.0.0.1:7400\"", nil, nil, `metrics.listen: "127.0.0.1:7400" is the API's listen address`},
		{"metrics listen env", "", []string{"KEEL_METRICS_LISTEN=nope"}, nil, `metrics.listen (from KEEL_METRICS_LISTEN): must be host:port`},
		{"metrics unknown env", "", []string{"KEEL_METRICS_ADDR=127.0.0.1:9090"}, nil, `KEEL_METRICS_ADDR`},
		{"metrics unknown key", "[metrics]\naddr = \"127.0.0.1:9090\"", nil, nil, `metrics.addr`},
		{"queue name", "[queues.\"bad name\"]\nworkers = 1", nil, nil, `queues.bad name: invalid queue name "bad name"`},
		{"workers", "[queues.default]\nworkers = 0", nil, nil, "queues.default.workers: must be in 1..10000, got 0"},
		{"prefetch negative", "[queues.default]\nprefetch = -1", nil, nil, "queues.default.prefetch: must be in 0..40 (0: off; at most 4×workers and 1000), got -1"},
		{"prefetch per worker", "[queues.default]\nworkers = 2\nprefetch = 9", nil, nil, "queues.default.prefetch: must be in 0..8 (0: off; at most 4×workers and 1000), got 9"},
		{"prefetch most", "[queues.default]\nworkers = 1000\nprefetch = 1001", nil, nil, "queues.default.prefetch: must be in 0..1000"},
		{"type name", "[types.\"a/b\"]\nqueue = \"x\"", nil, nil, `types.a/b: invalid type name "a/b"`},
		{"url", "[types.email]\nurl = \"ftp://mail/x\"", nil, nil, `types.email.url: must be an absolute http(s) URL, got "ftp://mail/x"`},
		{"url relative", "[types.email]\nurl = \"/send\"", nil, nil, `types.email.url: must be an absolute http(s) URL, got "/send"`},
		{"connect timeout", target + "connect_timeout = \"0s\"", nil, nil, `types.hook.connect_timeout: must be positive, got "0s"`},
		{"read timeout", target + "read_timeout = \"-2s\"", nil, nil, `types.hook.read_timeout: must be positive, got "-2s"`},
		{"max result", target + "max_result_bytes = 0", nil, nil, "types.hook.max_result_bytes: must be in 1..16777216 (16 MiB), got 0"},
		{"max result big", target + "max_result_bytes = 16777217", nil, nil, "types.hook.max_result_bytes: must be in 1..16777216"},
		{"header name", target + "headers = { \"Bad Header\" = \"x\" }", nil, nil, `types.hook.headers: invalid header name "Bad Header"`},
		{"header value", target + "headers = { \"X-A\" = \"a\\nb\" }", nil, nil, "types.hook.headers.X-A: must not contain line breaks"},
		{"header env unset", target + "headers_env = { \"Authorization\" = \"NOPE_AUTH\" }", nil, nil, "types.hook.headers_env.Authorization: environment variable NOPE_AUTH is not set"},
		{"header twice", target + "headers = { \"X-A\" = \"1\" }\nheaders_env = { \"X-A\" = \"A\" }", []string{"A=2"}, nil, "header X-A is also in types.hook.headers"},
		{"type queue missing", target + "queue = \"mail\"", nil, nil, `types.hook.queue: queue "mail" is not configured: add [queues.mail] with workers = N`},
		{"type queue name", "[types.r]\nqueue = \"a b\"", nil, nil, `types.r.queue: invalid queue name "a b"`},
		{"type priority", "[types.r]\nqueue = \"r\"\npriority = 2000000", nil, nil, "types.r.priority: must be in -1000000..1000000, got 2000000"},
		{"type attempts", "[types.r]\nqueue = \"r\"\nmax_attempts = 0", nil, nil, "types.r.max_attempts: must be in 1..1000, got 0"},
		{"type timeout", "[types.r]\nqueue = \"r\"\ntimeout = \"0s\"", nil, nil, `types.r.timeout: must be in 1ms..24h, got "0s"`},
		// The rules PATCH /v1/types/{name} applies.
		{"type timeout not whole ms", "[types.r]\nqueue = \"r\"\ntimeout = \"1500us\"", nil, nil, `types.r.timeout: must be a whole number of milliseconds (settings are stored in ms), got "1.5ms"`},
		{"type brake cooldown 1ns", target + "[types.hook.brake]\ncooldown = \"1ns\"", nil, nil, `types.hook.brake.cooldown: must be a whole number of milliseconds (settings are stored in ms), got "1ns"`},
		{"type backoff 1ns", target + "backoff_base = \"1ns\"", nil, nil, `types.hook.backoff_base: must be in 1ms..168h, got "1ns"`},
		{"type backoff max over 168h", target + "backoff_max = \"169h\"", nil, nil, `types.hook.backoff_max: must be in 1ms..168h, got "169h"`},
		{"type backoff", target + "backoff_base = \"1m\"\nbackoff_max = \"1s\"", nil, nil, `types.hook.backoff_max: "1s" must not be below backoff_base "1m"`},
		{"enqueue-only with target field", "[types.r]\nqueue = \"r\"\nread_timeout = \"1s\"", nil, nil, "types.r.read_timeout: applies only to a type with a url"},
		{"enqueue-only with backoff", "[types.r]\nqueue = \"r\"\nbackoff_base = \"1s\"", nil, nil, "types.r.backoff_base: applies only to a type with a url"},
		{"enqueue-only on worked queue", target + "[types.r]\n", nil, nil, `types.r.queue: queue "default" is worked by this server`},
		{"on_dead unknown", target + "on_dead = \"hook.failed\"", nil, nil, `types.hook.on_dead: type "hook.failed" is not configured`},
		{"on_dead itself", target + "on_dead = \"hook\"", nil, nil, "types.hook.on_dead: names the type itself"},
		{"on_dead reserved", target + "on_dead = \"keel.on_dead\"", nil, nil, `types.hook.on_dead: type names starting with "keel." are reserved`},
		{"brake window", target + "[types.hook.brake]\nwindow = -2", nil, nil, "types.hook.brake.window: must be in 1..10000"},
		{"brake threshold", target + "[types.hook.brake]\nthreshold = 1.5", nil, nil, "types.hook.brake.threshold: must be in (0, 1]"},
		{"brake cooldown", target + "[types.hook.brake]\ncooldown = \"-1s\"", nil, nil, `types.hook.brake.cooldown: must not be negative`},
		{"enqueue-only with brake", "[types.r]\nqueue = \"r\"\n[types.r.brake]\nwindow = 5", nil, nil, "types.r.brake: applies only to a type with a url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(Options{Path: write(t, tc.file), Environ: tc.env, Flags: tc.flag})
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	_, err := Load(Options{Path: write(t, "[engine]\nmax_attempts = 0\nclaim_batch = 0\n[log]\nlevel = \"x\"")})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"engine.max_attempts", "engine.claim_batch", "log.level"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
}

func TestWarnings(t *testing.T) {
	c := load(t, Options{Path: write(t, `
[queues.idle]
workers = 1
[queues.default]
workers = 1
[types.slow]
url = "http://127.0.0.1:9/"
timeout = "5s"
`)})
	joined := strings.Join(c.Warnings, "\n")
	for _, want := range []string{"queues.idle: no type with a url uses this queue", "types.slow.read_timeout (10s) is not below the task timeout (5s)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
}

func TestTokensAllowPublicListen(t *testing.T) {
	c := load(t, Options{Path: write(t, "listen = \"0.0.0.0:7400\"\n[[tokens]]\ntoken_env = \"T\"\nrole = \"enqueue\""),
		Environ: []string{"T=0123456789abcdef"}})
	if c.Tokens[0].Token != "0123456789abcdef" || c.Tokens[0].From != "file, from env T" {
		t.Fatalf("token %+v", c.Tokens[0])
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "1h30m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "250ms": 250 * time.Millisecond, "0d": 0,
	} {
		d, err := ParseDuration(in)
		if err != nil || d.D() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	for _, in := range []string{"", "30", "1.5d", "-1d", "d", "soon"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
	for d, want := range map[time.Duration]string{
		30 * time.Second: "30s", time.Hour: "1h", 90 * time.Minute: "1h30m", 2 * time.Minute: "2m",
		48 * time.Hour: "2d", 25 * time.Hour: "25h", 1500 * time.Millisecond: "1.5s", 0: "0s", 61 * time.Second: "1m1s",
	} {
		if got := Duration(d).String(); got != want {
			t.Errorf("Duration(%v).String() = %q, want %q", d, got, want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "127.1.2.3": true, "0.0.0.0": false, "": false, "10.0.0.1": false, "example.com": false} {
		if IsLoopback(host) != want {
			t.Errorf("IsLoopback(%q) = %v", host, !want)
		}
	}
}

// TestExample: the example file loads, sets every scalar setting and sets
// each to its default, and its commented-out types are valid.
func TestExample(t *testing.T) {
	c := load(t, Options{Path: write(t, Example)})
	for _, f := range fields {
		if c.Source(f.Key) != SourceFile {
			t.Errorf("the example does not set %s", f.Key)
		}
		if got, want := f.format(c), f.format(Defaults()); got != want {
			t.Errorf("the example sets %s = %q, the default is %q", f.Key, got, want)
		}
		if !strings.Contains(Example, f.Env) && f.Env != "" {
			t.Errorf("the example does not name %s", f.Env)
		}
	}
	var uncommented []string
	inTypes := false
	for _, line := range strings.Split(Example, "\n") {
		if strings.HasPrefix(line, "# [types.") {
			inTypes = true
		}
		if inTypes || strings.HasPrefix(line, "# [[tokens]]") || strings.HasPrefix(line, "# token") || strings.HasPrefix(line, "# role") {
			line = strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
		}
		uncommented = append(uncommented, line)
	}
	env := []string{"MAILER_AUTH=Bearer x", "KEEL_ADMIN_TOKEN=0123456789abcdef"}
	c = load(t, Options{Path: write(t, strings.Join(uncommented, "\n")), Environ: env})
	if len(c.Types) != 2 || !c.Types["email.send"].IsTarget() || c.Types["report.build"].Queue != "reports" || len(c.Tokens) != 2 {
		t.Fatalf("the commented-out examples: types %+v tokens %d", c.Types, len(c.Tokens))
	}
	if e := c.Types["email.send"]; e.OnDead != "report.build" || e.Brake.Window != 20 || e.Brake.Threshold != 0.8 || e.Brake.Cooldown.D() != 30*time.Second {
		t.Fatalf("the example's on_dead and brake: %+v", e)
	}
}

// TestSchedules: [[schedules]] blocks become keel.Schedule values, the
// payload table as JSON.
func TestSchedules(t *testing.T) {
	c, err := Load(Options{Path: write(t, `
[[schedules]]
name = "nightly"
spec = "0 3 * * *"
time_zone = "Europe/Berlin"
type = "report.build"
queue = "reports"
payload = { full = true, sections = ["a", "b"] }
priority = 5
missed = "skip"
[[schedules]]
name = "often"
spec = "@every 10s"
type = "ping"
`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Schedules) != 2 {
		t.Fatalf("schedules %+v", c.Schedules)
	}
	s := c.Schedules[0].KeelSchedule()
	if s.Name != "nightly" || s.Spec != "0 3 * * *" || s.TimeZone != "Europe/Berlin" || s.Type != "report.build" ||
		s.Queue != "reports" || s.Priority != 5 || s.Missed != keel.MissedSkip {
		t.Fatalf("nightly %+v", s)
	}
	if raw, err := json.Marshal(s.Payload); err != nil || string(raw) != `{"full":true,"sections":["a","b"]}` {
		t.Fatalf("payload %s %v", raw, err)
	}
	if o := c.Schedules[1].KeelSchedule(); o.Payload != nil || o.Validate() != nil {
		t.Fatalf("often %+v: %v", o, o.Validate())
	}
}

// TestTypeValuesFromTheFile: every setting of a type that the file sets is
// shown with source "file" (concurrency, rate, burst and ramp were shown
// as "default").
func TestTypeValuesFromTheFile(t *testing.T) {
	c := load(t, Options{Path: write(t, `
[types.report]
url = "http://127.0.0.1:9000/report"
queue = "reports"
priority = 3
max_attempts = 6
timeout = "2m"
concurrency = 2
rate = 5.5
burst = 3
connect_timeout = "2s"
read_timeout = "1m"
max_result_bytes = 2048
backoff_base = "2s"
backoff_max = "1m"

[types.slow]
url = "http://127.0.0.1:9000/slow"
queue = "reports"
ramp = { steps = [1, 2, 5], every = "10m" }

[queues.reports]
workers = 4
`)})
	seen := 0
	for _, v := range c.Values() {
		if v.Key == "types.slow.ramp" && v.Source != SourceFile {
			t.Errorf("%s = %s: source %s, want file", v.Key, v.Value, v.Source)
		}
		if !strings.HasPrefix(v.Key, "types.report.") {
			continue
		}
		seen++
		field := strings.TrimPrefix(v.Key, "types.report.")
		want := SourceFile
		if field == "on_dead" || field == "brake" {
			want = SourceDefault
		}
		if v.Source != want {
			t.Errorf("%s = %s: source %s, want %s", v.Key, v.Value, v.Source, want)
		}
	}
	if seen != 15 {
		t.Errorf("config check showed %d settings of types.report, want the 13 the file sets and the 2 it leaves out", seen)
	}
}
