package source

import (
	"errors"
	"strings"
	"testing"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
)

func TestConfigValidate(t *testing.T) {
	rabbit := Config{Name: "orders", Kind: KindRabbitMQ, URL: rabbitURL, Queue: "orders", Type: "order.import", Key: "/order_id"}
	nats := Config{Name: "orders", Kind: KindNATS, URL: natsURL, Stream: "ORDERS", Consumer: "keel", Type: "order.import", Key: "header:Nats-Msg-Id"}
	for _, ok := range []Config{rabbit, nats} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, tc := range []struct {
		change func(*Config)
		base   Config
		want   string
	}{
		{func(c *Config) { c.Name = "" }, rabbit, "source name"},
		{func(c *Config) { c.Name = "a b" }, rabbit, "source name"},
		{func(c *Config) { c.Kind = "kafka" }, rabbit, `kind "kafka"`},
		{func(c *Config) { c.URL = "" }, rabbit, "url is required"},
		{func(c *Config) { c.URL = "nats://x:4222" }, rabbit, "amqp://"},
		{func(c *Config) { c.URL = "amqp://guest:secret@h/" }, nats, "nats://"},
		{func(c *Config) { c.Queue = "" }, rabbit, "queue is required"},
		{func(c *Config) { c.Stream = "S" }, rabbit, "for NATS"},
		{func(c *Config) { c.Consumer = "" }, nats, "stream and consumer are required"},
		{func(c *Config) { c.Queue = "q" }, nats, "queue is for RabbitMQ"},
		{func(c *Config) { c.Type = "" }, rabbit, "type"},
		{func(c *Config) { c.TaskQueue = "bad queue" }, rabbit, "task_queue"},
		{func(c *Config) { c.Key = "" }, rabbit, "key is required"},
		{func(c *Config) { c.Key = "order_id" }, rabbit, "JSON pointer"},
		{func(c *Config) { c.Batch = -1 }, rabbit, "must not be negative"},
		{func(c *Config) { c.Batch = 10001 }, rabbit, "over 10000"},
		{func(c *Config) { c.NackDelay = -1 }, rabbit, "must not be negative"},
	} {
		c := tc.base
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %q", c, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the url's password: %v", err)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	drv, err := sqlite.Open(t.Context(), testdb.SQLiteFile(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	c := newClient(t, drv)
	if _, err := New(c, Config{Name: "x", Kind: KindRabbitMQ}); !errors.Is(err, keel.ErrInvalid) {
		t.Errorf("New with a bad config: %v, want ErrInvalid", err)
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New with a nil client: no error")
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"a\x00b", 10, "ab"},
		{"bad \xff byte", 20, "bad \uFFFD byte"},
		{"héllo wörld", 5, "h…"}, // never half a rune
		{"héllo wörld", 6, "hé…"},
	} {
		if got := cut(tc.in, tc.n); got != tc.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
