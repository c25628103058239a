package config

import (
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/source"
)

// TestSources: [[sources]] blocks become source.Config values, every key
// read, durations as strings; left-out keys stay zero (source.Config's
// defaults apply); keel config check shows them with the URL's password
// redacted.
func TestSources(t *testing.T) {
	c := load(t, Options{Path: write(t, `
[[sources]]
name = "orders"
kind = "rabbitmq"
url = "amqp://keel:s3cret@127.0.0.1:5672/prod"
queue = "orders"
prefetch = 50
type = "order.created"
task_queue = "orders"
key = "/order_id"
max_body = 65536
batch = 25
inflight = 2
linger = "10ms"
max_backlog = 500
nack_delay = "2s"

[[sources]]
name = "events"
kind = "nats"
url = "nats://127.0.0.1:4222"
stream = "EVENTS"
subject = "events.>"
consumer = "keel"
ack_wait = "1m"
type = "event.seen"
key = "header:Nats-Msg-Id"
`)})
	if len(c.Sources) != 2 {
		t.Fatalf("sources %+v", c.Sources)
	}
	got := c.Sources[0].Config()
	want := source.Config{Name: "orders", Kind: source.KindRabbitMQ, URL: "amqp://keel:s3cret@127.0.0.1:5672/prod", Queue: "orders",
		Prefetch: 50, Type: "order.created", TaskQueue: "orders", Key: "/order_id", MaxBody: 65536, Batch: 25, Inflight: 2,
		Linger: 10 * time.Millisecond, MaxBacklog: 500, NackDelay: 2 * time.Second}
	if got.Name != want.Name || got.Kind != want.Kind || got.URL != want.URL || got.Queue != want.Queue || got.Prefetch != want.Prefetch ||
		got.Type != want.Type || got.TaskQueue != want.TaskQueue || got.Key != want.Key || got.MaxBody != want.MaxBody ||
		got.Batch != want.Batch || got.Inflight != want.Inflight || got.Linger != want.Linger || got.MaxBacklog != want.MaxBacklog || got.NackDelay != want.NackDelay {
		t.Fatalf("orders:\n got %+v\nwant %+v", got, want)
	}
	n := c.Sources[1].Config()
	if n.Kind != source.KindNATS || n.Stream != "EVENTS" || n.Subject != "events.>" || n.Consumer != "keel" || n.AckWait != time.Minute ||
		n.Key != "header:Nats-Msg-Id" || n.Batch != 0 || n.Linger != 0 || n.TaskQueue != "" || n.Validate() != nil {
		t.Fatalf("events: %+v (%v)", n, n.Validate())
	}

	v := value(t, c, "sources[0]")
	if strings.Contains(v.Value, "s3cret") || !strings.Contains(v.Value, "url=amqp://keel:xxxxx@127.0.0.1:5672/prod") ||
		!strings.Contains(v.Value, "linger=10ms") || !strings.Contains(v.Value, "key=/order_id") || !strings.Contains(v.Note, "redacted") {
		t.Fatalf("sources[0] as keel config check shows it: %+v", v)
	}
	if v := value(t, c, "sources[1]"); !strings.Contains(v.Value, "url=nats://127.0.0.1:4222") || !strings.Contains(v.Value, "ack_wait=1m") {
		t.Fatalf("sources[1]: %+v", v)
	}
	for _, w := range c.Warnings {
		if strings.Contains(w, "sources") {
			t.Errorf("warning without [types]: %s", w)
		}
	}
}

// TestSourceErrors: every bad block is refused with its index named, and
// never with the URL's password in the message.
func TestSourceErrors(t *testing.T) {
	const rabbit = "[[sources]]\nname = \"orders\"\nkind = \"rabbitmq\"\nurl = \"amqp://u:pw@h/\"\nqueue = \"q\"\ntype = \"order.created\"\nkey = \"/id\"\n"
	for name, tc := range map[string]struct{ file, want string }{
		"missing name":    {strings.Replace(rabbit, "name = \"orders\"\n", "", 1), `sources[0]: source name "": must be 1..128`},
		"missing type":    {strings.Replace(rabbit, "type = \"order.created\"\n", "", 1), `sources[0]: source "orders": type "" must be`},
		"missing key":     {strings.Replace(rabbit, "key = \"/id\"\n", "", 1), `sources[0]: source "orders":`},
		"missing url":     {strings.Replace(rabbit, "url = \"amqp://u:pw@h/\"\n", "", 1), `sources[0]: source "orders": url is required`},
		"missing queue":   {strings.Replace(rabbit, "queue = \"q\"\n", "", 1), `sources[0]: source "orders": queue is required for RabbitMQ`},
		"bad kind":        {strings.Replace(rabbit, `"rabbitmq"`, `"kafka"`, 1), `sources[0]: source "orders": kind "kafka" must be "rabbitmq" or "nats"`},
		"wrong scheme":    {strings.Replace(rabbit, "amqp://u:pw@h/", "http://u:pw@h/", 1), `sources[0]: source "orders": url "http://u:xxxxx@h/"`},
		"nats no stream":  {"[[sources]]\nname = \"e\"\nkind = \"nats\"\nurl = \"nats://h:4222\"\nconsumer = \"c\"\ntype = \"t\"\nkey = \"/id\"\n", `sources[0]: source "e": stream and consumer are required for NATS`},
		"nats with queue": {"[[sources]]\nname = \"e\"\nkind = \"nats\"\nurl = \"nats://h:4222\"\nstream = \"S\"\nconsumer = \"c\"\nqueue = \"q\"\ntype = \"t\"\nkey = \"/id\"\n", `queue is for RabbitMQ`},
		"duplicate name":  {rabbit + rabbit, `sources[1].name: "orders" is also the name of sources[0]`},
		"bad duration":    {rabbit + "linger = \"soon\"\n", `invalid duration "soon"`},
		"number duration": {rabbit + "nack_delay = 5\n", `duration must be a string such as "30s"`},
		"negative":        {rabbit + "nack_delay = \"-1s\"\n", `sources[0]: source "orders": ack_wait, linger, nack_delay`},
		"negative batch":  {rabbit + "batch = -1\n", `sources[0]: source "orders": prefetch, batch, inflight and max_body must not be negative`},
		"unknown key":     {rabbit + "exchange = \"x\"\n", `unknown key sources.exchange`},
		"second block":    {rabbit + strings.Replace(strings.Replace(rabbit, "orders", "other", 1), `"/id"`, `"id"`, 1), `sources[1]: source "other":`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(Options{Path: write(t, tc.file)})
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Fatalf("error shows the URL's password: %v", err)
			}
		})
	}
}

// TestSourceTypeUnknown: a source whose type keel serve's client would
// refuse is an error (its messages could never become tasks); with
// any_type it loads.
func TestSourceTypeUnknown(t *testing.T) {
	const file = `
[[sources]]
name = "orders"
kind = "rabbitmq"
url = "amqp://127.0.0.1/"
queue = "q"
type = "order.created"
key = "/id"
[types."email.send"]
queue = "mail"
`
	_, err := Load(Options{Path: write(t, file)})
	if err == nil || !strings.Contains(err.Error(), `sources[0].type: "order.created" is not in [types]`) {
		t.Fatalf("Load: %v; want an error about the source's type", err)
	}
	load(t, Options{Path: write(t, "any_type = true\n"+file)})
}
