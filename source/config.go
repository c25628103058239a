package source

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/sourcemap"
)

// The kinds of source.
const (
	KindRabbitMQ = "rabbitmq"
	KindNATS     = "nats"
)

// Config configures one source: where it consumes and what tasks its
// messages become. Name, Kind, URL, Type and Key are required, with Queue
// (RabbitMQ) or Stream and Consumer (NATS).
type Config struct {
	// Name names the source in metrics, reports and rejected messages:
	// 1..128 letters, digits and . _ - : (starting with a letter or digit). Required.
	Name string
	// Kind is KindRabbitMQ or KindNATS. Required.
	Kind string
	// URL is the broker's address: amqp://user:pass@host:5672/vhost or
	// nats://host:4222. Required.
	URL string

	// Queue is the RabbitMQ queue consumed; it is declared durable when
	// missing. Required for RabbitMQ.
	Queue string
	// Prefetch is how many unacknowledged RabbitMQ messages the broker
	// sends ahead (basic.qos); NATS: the consumer's MaxAckPending. Default
	// (Inflight + 1) × Batch.
	Prefetch int

	// Stream is the JetStream stream consumed; it is created, on Subject,
	// when missing. Required for NATS.
	Stream string
	// Subject is the stream's subject filter for the consumer, and the
	// stream's subject when the source creates it. Default: every subject
	// of the stream (a created stream: Stream + ".>").
	Subject string
	// Consumer is the durable JetStream consumer's name; it is created or
	// updated to explicit acks. Required for NATS.
	Consumer string
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Default 30s.
	AckWait time.Duration

	// Type is the task type each message becomes. Required.
	Type string
	// TaskQueue is the task queue it goes into. Default: the type's.
	TaskQueue string
	// Key names the natural key for UniqueBy: a JSON pointer into the
	// body ("/order_id") or "header:NAME" (for RabbitMQ, "header:message-id"
	// falls back to the message_id property). Required.
	Key string
	// MaxBody is the largest body that becomes a task; a larger one is
	// rejected. Default 1 MiB (the payload limit).
	MaxBody int

	// Batch is how many messages go into one insert transaction. Default
	// 100.
	Batch int
	// Inflight is how many batches are being stored at once. Default 4.
	Inflight int
	// Linger is how long a batch waits to fill once its first message
	// arrived. Default 5ms.
	Linger time.Duration
	// MaxBacklog stops pulling messages while the type has more pending
	// tasks than this (back-pressure); a negative value turns the bound
	// off. Default 10000.
	MaxBacklog int64
	// NackDelay is how long a message waits before it is handed back to
	// the broker when the database cannot take it. Default 5s.
	NackDelay time.Duration
	// Check is how often the source reads its queue's and type's pause
	// and backlog, and writes its report. Default 1s.
	Check time.Duration
	// Reconnect is the wait before connecting again after the broker's
	// connection failed, doubled up to 30s. Default 500ms.
	Reconnect time.Duration

	// Node names this process in the source's report. Default: the
	// client's node.
	Node string
	// Logger receives the source's logs. Default: the client's logger.
	Logger *slog.Logger
	// Registerer, when set, receives the source's metrics
	// (keel_source_messages_total, keel_source_ack_seconds). Default nil.
	Registerer prometheus.Registerer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Validate names the first field of c that is wrong.
func (c Config) Validate() error {
	switch {
	case !validName(c.Name):
		return fmt.Errorf("source name %q: must be 1..128 letters, digits and . _ - : (starting with a letter or digit)", c.Name)
	case c.Kind != KindRabbitMQ && c.Kind != KindNATS:
		return fmt.Errorf("source %q: kind %q must be %q or %q", c.Name, c.Kind, KindRabbitMQ, KindNATS)
	case c.URL == "":
		return fmt.Errorf("source %q: url is required", c.Name)
	case !validName(c.Type):
		return fmt.Errorf("source %q: type %q must be 1..128 letters, digits and . _ - : (starting with a letter or digit)", c.Name, c.Type)
	case c.TaskQueue != "" && !validName(c.TaskQueue):
		return fmt.Errorf("source %q: task_queue %q must be 1..128 letters, digits and . _ - : (starting with a letter or digit)", c.Name, c.TaskQueue)
	case c.Prefetch < 0 || c.Batch < 0 || c.MaxBody < 0 || c.Inflight < 0:
		return fmt.Errorf("source %q: prefetch, batch, inflight and max_body must not be negative", c.Name)
	case c.Inflight > 64:
		return fmt.Errorf("source %q: inflight %d over 64", c.Name, c.Inflight)
	case c.Batch > 10000:
		return fmt.Errorf("source %q: batch %d over 10000", c.Name, c.Batch)
	case c.AckWait < 0 || c.Linger < 0 || c.NackDelay < 0 || c.Check < 0 || c.Reconnect < 0:
		return fmt.Errorf("source %q: ack_wait, linger, nack_delay, check and reconnect must not be negative", c.Name)
	}
	if err := sourcemap.ValidateSpec(c.Key); err != nil {
		return fmt.Errorf("source %q: %w", c.Name, err)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("source %q: url: %w", c.Name, err)
	}
	switch c.Kind {
	case KindRabbitMQ:
		if u.Scheme != "amqp" && u.Scheme != "amqps" {
			return fmt.Errorf("source %q: url %q: a RabbitMQ url starts with amqp:// or amqps://", c.Name, redact(u))
		}
		if c.Queue == "" {
			return fmt.Errorf("source %q: queue is required for RabbitMQ", c.Name)
		}
		if c.Stream != "" || c.Consumer != "" || c.Subject != "" {
			return fmt.Errorf("source %q: stream, subject and consumer are for NATS, not RabbitMQ", c.Name)
		}
	case KindNATS:
		if u.Scheme != "nats" && u.Scheme != "tls" {
			return fmt.Errorf("source %q: url %q: a NATS url starts with nats:// or tls://", c.Name, redact(u))
		}
		if c.Stream == "" || c.Consumer == "" {
			return fmt.Errorf("source %q: stream and consumer are required for NATS", c.Name)
		}
		if c.Queue != "" {
			return fmt.Errorf("source %q: queue is for RabbitMQ; NATS takes stream, subject and consumer", c.Name)
		}
	}
	return nil
}

// withDefaults fills the zero fields with their defaults.
func (c Config) withDefaults() Config {
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.Inflight == 0 {
		c.Inflight = 4
	}
	if c.Prefetch == 0 {
		c.Prefetch = (c.Inflight + 1) * c.Batch
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxBody == 0 {
		c.MaxBody = 1 << 20
	}
	if c.Linger == 0 {
		c.Linger = 5 * time.Millisecond
	}
	if c.MaxBacklog == 0 {
		c.MaxBacklog = 10000
	}
	if c.NackDelay == 0 {
		c.NackDelay = 5 * time.Second
	}
	if c.Check == 0 {
		c.Check = time.Second
	}
	if c.Reconnect == 0 {
		c.Reconnect = 500 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func validName(s string) bool { return driver.ValidName(s) }

// redact hides a URL's password.
func redact(u *url.URL) string { return u.Redacted() }

// redactURL is raw with its password hidden.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(bad url)"
	}
	return u.Redacted()
}

var errStopped = errors.New("source stopped")
