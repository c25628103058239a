package testdb

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// The environment variables that name the other test servers.
const (
	EnvRedis    = "KEEL_TEST_REDIS"    // host:port, default 127.0.0.1:6379
	EnvRabbitMQ = "KEEL_TEST_RABBITMQ" // amqp URL, default amqp://guest:guest@127.0.0.1:5672/
	EnvNATS     = "KEEL_TEST_NATS"     // nats URL, default nats://127.0.0.1:4222
	EnvChromium = "KEEL_TEST_CHROMIUM" // a Chromium binary, default chromium on PATH
)

// A Service is something the tests need beyond Go and SQLite: a database
// server, a broker, a browser.
type Service struct {
	Name string // as a person says it: "PostgreSQL"
	Env  string // the variable that names it
	// probe says why the service cannot be used, or nil.
	probe func() error
	once  sync.Once
	err   error
}

// The services, each probed once per test binary.
var (
	Postgres = &Service{Name: "PostgreSQL", Env: EnvPostgres, probe: func() error {
		cfg, err := pgx.ParseConfig(PostgresDSN())
		if err != nil {
			return fmt.Errorf("%s %q: %w", EnvPostgres, PostgresDSN(), err)
		}
		return dial(net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)))
	}}
	MySQL = &Service{Name: "MariaDB/MySQL", Env: EnvMySQL, probe: func() error {
		cfg, err := gomysql.ParseDSN(MySQLDSN())
		if err != nil {
			return fmt.Errorf("%s %q: %w", EnvMySQL, MySQLDSN(), err)
		}
		if cfg.Net == "unix" {
			_, err := os.Stat(cfg.Addr)
			return err
		}
		return dial(cfg.Addr)
	}}
	Redis = &Service{Name: "Redis", Env: EnvRedis, probe: func() error {
		return dial(RedisAddr())
	}}
	RabbitMQ = &Service{Name: "RabbitMQ", Env: EnvRabbitMQ, probe: func() error {
		return dialURL(RabbitURL(), "5672")
	}}
	NATS = &Service{Name: "NATS", Env: EnvNATS, probe: func() error {
		return dialURL(NATSURL(), "4222")
	}}
	Chromium = &Service{Name: "Chromium", Env: EnvChromium, probe: func() error {
		_, err := ChromiumPath()
		return err
	}}
)

// RedisAddr is the test Redis server: KEEL_TEST_REDIS, or 127.0.0.1:6379.
func RedisAddr() string { return envOr(EnvRedis, "127.0.0.1:6379") }

// RabbitURL is the test RabbitMQ broker: KEEL_TEST_RABBITMQ, or
// amqp://guest:guest@127.0.0.1:5672/.
func RabbitURL() string { return envOr(EnvRabbitMQ, "amqp://guest:guest@127.0.0.1:5672/") }

// NATSURL is the test NATS server (with JetStream): KEEL_TEST_NATS, or
// nats://127.0.0.1:4222.
func NATSURL() string { return envOr(EnvNATS, "nats://127.0.0.1:4222") }

// ChromiumPath finds the browser the dashboard's tests drive:
// KEEL_TEST_CHROMIUM, else chromium or chromium-browser on PATH.
func ChromiumPath() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium on PATH (apt-get install chromium)")
}

// dial is the probe of a TCP server: it accepts a connection.
func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// dialURL dials the host of a broker URL, on defPort when it names none.
func dialURL(raw, defPort string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = defPort
	}
	return dial(net.JoinHostPort(u.Hostname(), port))
}

// Err says why the service cannot be used, or nil: probed once.
func (s *Service) Err() error {
	s.once.Do(func() { s.err = s.probe() })
	return s.err
}

// CI reports whether the tests run in CI (CI=true), where a missing service
// fails the test instead of skipping it, so that CI never passes by
// skipping.
func CI() bool { return os.Getenv("CI") == "true" }

// Require skips the test, with one line saying how to enable it, when the
// service cannot be reached; under CI=true it fails the test instead.
func Require(t testing.TB, s *Service) {
	t.Helper()
	err := s.Err()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("needs %s: %v (start it, or set %s; bash .ci/run starts every service)", s.Name, err, s.Env)
	if CI() {
		t.Fatalf("%s; CI=true, so a missing service fails", msg)
		return
	}
	t.Skip(msg)
}
