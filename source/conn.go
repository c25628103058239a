package source

import "time"

// conn is one connection to a broker, as the source uses it.
type conn interface {
	// deliveries yields the messages; it is closed when the connection
	// fails (err then tells why) or is closed.
	deliveries() <-chan *delivery
	err() error
	// ack acknowledges every message of a batch, in delivery order.
	ack(batch []*delivery) error
	// nack hands a batch back for redelivery after delay (where the
	// broker can wait; RabbitMQ redelivers at once).
	nack(batch []*delivery, delay time.Duration) error
	close()
}

// delivery is one message as a broker delivered it.
type delivery struct {
	body     []byte
	headers  map[string][]string
	received time.Time
	tag      uint64 // RabbitMQ's delivery tag
	msg      any    // the broker's own message (NATS), to ack it
	// messageID is the broker's own message id (RabbitMQ's message_id
	// property), read by "header:message-id" when no header has that name.
	messageID string
}
