// Package source consumes message brokers into keel tasks: a RabbitMQ
// queue or a NATS JetStream durable consumer becomes tasks of one type,
// without losing a message or making two tasks of one.
//
// Brokers deliver at least once, so a consumer must record each message
// before acknowledging it and recognise a redelivery. A Source does, for
// each batch of messages:
//
//  1. checks each message: its body must be JSON of at most MaxBody
//     bytes, and carry its natural key (Config.Key: a JSON pointer into
//     the body, or a header);
//  2. enqueues the good ones in one transaction, each with
//     keel.UniqueBy(its natural key), and stores the others, raw body,
//     headers and reason, in keel_rejected (see keel.Client.Rejected and
//     ResubmitRejected);
//  3. only then acknowledges the batch.
//
// A message redelivered after a crash or a cut connection finds its task
// through the idempotency key and is acknowledged as a duplicate. When the
// database cannot take a batch, the batch is handed back to the broker
// after NackDelay (nack with requeue; NATS: NakWithDelay) and nothing is
// acknowledged. The source stops pulling while its type or task queue is
// paused, or while its type has more than MaxBacklog pending tasks.
//
// A Source reports its state and counters (accepted, duplicate, rejected,
// nacked, ack time percentiles) for its node every Check into the
// database, read back by keel.Client.Sources, the API, keel stats and the
// dashboard, and counts keel_source_messages_total{source,result} and
// keel_source_ack_seconds{source} in Config.Registerer.
//
// keel serve runs the [[sources]] blocks of keel.toml; a Go program starts
// a Source beside its client:
//
//	src, err := source.New(client, source.Config{
//		Name: "orders", Kind: source.KindRabbitMQ,
//		URL: "amqp://guest:guest@127.0.0.1:5672/", Queue: "orders",
//		Type: "order.import", Key: "/order_id",
//	})
//	if err != nil { ... }
//	src.Start(ctx)
//	defer src.Stop(context.Background())
package source
