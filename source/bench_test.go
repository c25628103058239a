package source

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelq/keel/internal/brokertest"
)

// The benchmarks publish b.N messages (not timed), then time how long
// they take to be consumed: into tasks by a Source ("source/<database>"),
// and by a bare consumer that only acknowledges them ("broker"), the
// broker's own consume rate on this machine. Each reports msgs/s.
//
//	go test -run '^$' -bench . -benchtime 20000x ./source/

func orderBodies(n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"order_id": %d, "note": "bench"}`, i)
	}
	return bodies
}

func BenchmarkRabbitMQ(b *testing.B) {
	b.Run("broker", func(b *testing.B) {
		queue := publishRabbitN(b, b.N)
		conn, err := amqp.Dial(rabbitURL)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Qos(200, 0, false); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		msgs, err := ch.Consume(queue, "", false, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := 1; i <= b.N; i++ {
			m := <-msgs
			if i%100 == 0 || i == b.N { // acknowledged in batches, as the source does
				if err := m.Ack(true); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b)
	})
	for _, db := range databases {
		b.Run("source/"+db, func(b *testing.B) {
			queue := publishRabbitN(b, b.N)
			runSource(b, Config{Name: "bench", Kind: KindRabbitMQ, URL: rabbitURL, Queue: queue,
				Type: "order.import", Key: "/order_id", MaxBacklog: -1}, db)
		})
	}
}

func publishRabbitN(b *testing.B, n int) string {
	queue := brokertest.RabbitQueue(b)
	bodies := orderBodies(n)
	for i := 0; i < n; i += 5000 {
		if err := brokertest.PublishRabbit(b.Context(), queue, bodies[i:min(n, i+5000)]); err != nil {
			b.Fatal(err)
		}
	}
	return queue
}

func BenchmarkNATS(b *testing.B) {
	b.Run("broker", func(b *testing.B) {
		stream, js := natsStream(b)
		publishNATS(b, js, stream+".orders", orderBodies(b.N))
		cons, err := js.CreateOrUpdateConsumer(b.Context(), stream, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 200})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		it, err := cons.Messages(jetstream.PullMaxMessages(200))
		if err != nil {
			b.Fatal(err)
		}
		defer it.Stop()
		for range b.N {
			m, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Ack(); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	for _, db := range databases {
		b.Run("source/"+db, func(b *testing.B) {
			stream, js := natsStream(b)
			publishNATS(b, js, stream+".orders", orderBodies(b.N))
			runSource(b, Config{Name: "bench", Kind: KindNATS, URL: natsURL, Stream: stream, Consumer: "keel",
				Type: "order.import", Key: "/order_id", MaxBacklog: -1}, db)
		})
	}
}

// runSource times a source of cfg consuming b.N published messages into
// tasks of a fresh database.
func runSource(b *testing.B, cfg Config, db string) {
	c := newClient(b, openDriver(b, db))
	cfg.Logger = testLogger(b)
	s, err := New(c, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer s.Stop(context.Background())
	for s.accepted.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	report(b)
}

func report(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
