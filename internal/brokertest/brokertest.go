// Package brokertest gives tests a RabbitMQ queue of their own on the test
// broker (testdb.RabbitURL: 127.0.0.1:5672, guest/guest, started by the
// test command when down; a test skips when it is unreachable), and
// publishes to it with confirms.
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelq/keel/internal/testdb"
)

// RabbitURL is the test broker: KEEL_TEST_RABBITMQ, or
// amqp://guest:guest@127.0.0.1:5672/.
func RabbitURL() string { return testdb.RabbitURL() }

// UniqueName is prefix with random hex: a broker name of one test's own.
func UniqueName(prefix string) string {
	var b [5]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// RabbitQueue names a queue of the test's own, deleted when it ends. It
// skips the test when the broker is unreachable (fails it under CI=true).
func RabbitQueue(t testing.TB) string {
	t.Helper()
	testdb.Require(t, testdb.RabbitMQ)
	q := UniqueName("keeltest.")
	t.Cleanup(func() {
		conn, err := amqp.Dial(RabbitURL())
		if err != nil {
			return
		}
		defer conn.Close()
		if ch, err := conn.Channel(); err == nil {
			ch.QueueDelete(q, false, false, false) //nolint:errcheck // best effort
		}
	})
	return q
}

// PublishRabbit publishes bodies persistently to queue (declared durable
// when missing) and waits for the broker's confirms. Safe in a goroutine.
func PublishRabbit(ctx context.Context, queue string, bodies [][]byte) error {
	conn, err := amqp.Dial(RabbitURL())
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, len(bodies)))
	for i, b := range bodies {
		err := ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: b,
			Headers: amqp.Table{"x-seq": int64(i)},
		})
		if err != nil {
			return err
		}
	}
	for range bodies {
		if c := <-confirms; !c.Ack {
			return fmt.Errorf("the broker refused message %d", c.DeliveryTag)
		}
	}
	return nil
}

// RabbitReady is how many messages wait in queue: with no consumer on
// it, every message not acknowledged.
func RabbitReady(t testing.TB, queue string) int {
	t.Helper()
	conn, err := amqp.Dial(RabbitURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}
