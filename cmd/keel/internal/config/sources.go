package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/keelq/keel/source"
)

// BrokerSource is one [[sources]] block: a RabbitMQ queue or NATS
// JetStream consumer whose messages become tasks (see source.Config, which
// Config returns). Environment variables do not override it.
type BrokerSource struct {
	// Name names the source in reports, metrics and rejected messages:
	// 1-128 letters, digits and _ . : -. Required.
	Name string `toml:"name"`
	// Kind is "rabbitmq" or "nats". Required.
	Kind string `toml:"kind"`
	// URL is the broker: amqp://user:pass@host:5672/vhost or
	// nats://host:4222. Its password is redacted wherever keel prints it.
	// Required.
	URL string `toml:"url"`
	// Queue is the RabbitMQ queue consumed. Required for rabbitmq.
	Queue string `toml:"queue"`
	// Prefetch is how many unacknowledged messages the broker sends ahead.
	// Default 0 ((inflight + 1) × batch).
	Prefetch int `toml:"prefetch"`
	// Stream is the JetStream stream consumed. Required for nats.
	Stream string `toml:"stream"`
	// Subject filters the stream's subjects. Default "" (all of them).
	Subject string `toml:"subject"`
	// Consumer is the durable JetStream consumer. Required for nats.
	Consumer string `toml:"consumer"`
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Default "30s".
	AckWait Duration `toml:"ack_wait"`
	// Type is the task type each message becomes. Required.
	Type string `toml:"type"`
	// TaskQueue is the task queue the tasks go to. Default "" (the type's).
	TaskQueue string `toml:"task_queue"`
	// Key names the natural key: a JSON pointer into the body
	// ("/order_id") or "header:NAME". Required.
	Key string `toml:"key"`
	// MaxBody is the largest body that becomes a task, in bytes; a larger
	// one is rejected. Default 1048576 (1 MiB).
	MaxBody int `toml:"max_body"`
	// Batch is how many messages go into one insert. Default 100.
	Batch int `toml:"batch"`
	// Inflight is how many batches are stored at once. Default 4.
	Inflight int `toml:"inflight"`
	// Linger is how long a batch waits to fill. Default "5ms".
	Linger Duration `toml:"linger"`
	// MaxBacklog stops consuming while the type has more pending tasks
	// than this; a negative value turns the bound off. Default 10000.
	MaxBacklog int64 `toml:"max_backlog"`
	// NackDelay is how long a message waits before it is handed back when
	// the database cannot take it. Default "5s".
	NackDelay Duration `toml:"nack_delay"`
}

// Config returns the block as package source takes it; the fields the
// block leaves out take source.Config's defaults.
func (s BrokerSource) Config() source.Config {
	return source.Config{
		Name: s.Name, Kind: s.Kind, URL: s.URL,
		Queue: s.Queue, Prefetch: s.Prefetch,
		Stream: s.Stream, Subject: s.Subject, Consumer: s.Consumer, AckWait: s.AckWait.D(),
		Type: s.Type, TaskQueue: s.TaskQueue, Key: s.Key, MaxBody: s.MaxBody,
		Batch: s.Batch, Inflight: s.Inflight, Linger: s.Linger.D(), MaxBacklog: s.MaxBacklog, NackDelay: s.NackDelay.D(),
	}
}

// RedactedURL is the block's URL with its password replaced by "xxxxx".
func (s BrokerSource) RedactedURL() string { return redactURL(s.URL) }

// redactURL hides the password of a URL, also of one url.Parse refuses.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	return RedactDSN(raw)
}

// validateSources checks each [[sources]] block with source.Config's
// rules, and that no two share a name.
func (c *Config) validateSources(v *checker) {
	seen := map[string]int{}
	for i, s := range c.Sources {
		key := fmt.Sprintf("sources[%d]", i)
		if j, ok := seen[s.Name]; ok && s.Name != "" {
			v.bad(key+".name", "%q is also the name of sources[%d]", s.Name, j)
		}
		seen[s.Name] = i
		if err := s.Config().Validate(); err != nil {
			// source.Config's message may quote the URL: never its password.
			msg := err.Error()
			if s.URL != "" {
				msg = strings.ReplaceAll(msg, s.URL, s.RedactedURL())
			}
			v.bad(key, "%s", msg)
			continue
		}
		if _, ok := c.Types[s.Type]; !ok && len(c.Types) > 0 && !c.AnyType {
			// keel serve's client could not enqueue it: every message
			// would be handed back to the broker forever.
			v.bad(key+".type", "%q is not in [types], and any_type is off: add [types.%s] or set any_type = true", s.Type, s.Type)
		}
	}
}

// sourceValues lists the [[sources]] blocks for keel config check, the
// URLs' passwords redacted.
func (c *Config) sourceValues() []Value {
	var out []Value
	for i, s := range c.Sources {
		parts := []string{"name=" + s.Name, "kind=" + s.Kind, "url=" + s.RedactedURL()}
		add := func(k, v string) {
			if v != "" && v != "0" && v != "0s" {
				parts = append(parts, k+"="+v)
			}
		}
		add("queue", s.Queue)
		add("prefetch", strconv.Itoa(s.Prefetch))
		add("stream", s.Stream)
		add("subject", s.Subject)
		add("consumer", s.Consumer)
		add("ack_wait", s.AckWait.String())
		add("type", s.Type)
		add("task_queue", s.TaskQueue)
		add("key", s.Key)
		add("max_body", strconv.Itoa(s.MaxBody))
		add("batch", strconv.Itoa(s.Batch))
		add("inflight", strconv.Itoa(s.Inflight))
		add("linger", s.Linger.String())
		add("max_backlog", strconv.FormatInt(s.MaxBacklog, 10))
		add("nack_delay", s.NackDelay.String())
		out = append(out, Value{Key: fmt.Sprintf("sources[%d]", i), Value: strings.Join(parts, " "), Source: SourceFile,
			Note: "url password redacted; fields left out take their defaults"})
	}
	return out
}
