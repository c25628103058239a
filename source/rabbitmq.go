package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitConn consumes a RabbitMQ queue on one channel.
type rabbitConn struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	out  chan *delivery
	// multiple: one batch at a time, so a batch's last delivery tag
	// acknowledges the whole batch.
	multiple bool

	mu      sync.Mutex
	lastErr error
}

// rabbitDialTimeout bounds opening a RabbitMQ connection.
var rabbitDialTimeout = 5 * time.Second

func (s *Source) dialRabbitMQ(ctx context.Context) (conn, error) {
	dial := amqp.DefaultDial(rabbitDialTimeout)
	if s.testDial != nil {
		dial = s.testDial
	}
	c, err := amqp.DialConfig(s.cfg.URL, amqp.Config{Heartbeat: 10 * time.Second, Locale: "en_US", Dial: dial,
		Properties: amqp.Table{"connection_name": "keel source " + s.cfg.Name}})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", redactURL(s.cfg.URL), err)
	}
	rc := &rabbitConn{conn: c}
	if err := rc.open(s); err != nil {
		_ = c.Close()
		return nil, err
	}
	return rc, nil
}

// open declares the queue (durable, when missing), sets the prefetch and
// starts consuming.
func (rc *rabbitConn) open(s *Source) error {
	ch, err := rc.conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if _, err := ch.QueueDeclarePassive(s.cfg.Queue, true, false, false, false, nil); err != nil {
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
			return fmt.Errorf("find queue %q: %w", s.cfg.Queue, err)
		}
		// The failed passive declare closed the channel.
		if ch, err = rc.conn.Channel(); err != nil {
			return fmt.Errorf("open channel: %w", err)
		}
		if _, err := ch.QueueDeclare(s.cfg.Queue, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare queue %q: %w", s.cfg.Queue, err)
		}
		s.log.Info("source: declared the RabbitMQ queue", "queue", s.cfg.Queue)
	}
	if err := ch.Qos(s.cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("set prefetch %d: %w", s.cfg.Prefetch, err)
	}
	msgs, err := ch.Consume(s.cfg.Queue, "keel-"+s.cfg.Name+"-"+s.cfg.Node, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume queue %q: %w", s.cfg.Queue, err)
	}
	rc.ch = ch
	rc.multiple = s.cfg.Inflight == 1
	rc.out = make(chan *delivery, s.cfg.Prefetch)
	closed := rc.conn.NotifyClose(make(chan *amqp.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		defer close(rc.out)
		for m := range msgs {
			rc.out <- &delivery{body: m.Body, headers: amqpHeaders(m.Headers), received: time.Now(), tag: m.DeliveryTag, messageID: m.MessageId}
		}
		select {
		case e := <-closed:
			rc.setErr(e)
		case e := <-chClosed:
			rc.setErr(e)
		default:
		}
	}()
	return nil
}

func (rc *rabbitConn) setErr(e *amqp.Error) {
	if e == nil {
		return
	}
	rc.mu.Lock()
	rc.lastErr = e
	rc.mu.Unlock()
}

func (rc *rabbitConn) deliveries() <-chan *delivery { return rc.out }

func (rc *rabbitConn) err() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.lastErr
}

func (rc *rabbitConn) ack(batch []*delivery) error {
	if rc.multiple {
		return rc.ch.Ack(batch[len(batch)-1].tag, true)
	}
	for _, d := range batch {
		if err := rc.ch.Ack(d.tag, false); err != nil {
			return err
		}
	}
	return nil
}

func (rc *rabbitConn) nack(batch []*delivery, _ time.Duration) error {
	if rc.multiple {
		return rc.ch.Nack(batch[len(batch)-1].tag, true, true)
	}
	for _, d := range batch {
		if err := rc.ch.Nack(d.tag, false, true); err != nil {
			return err
		}
	}
	return nil
}

func (rc *rabbitConn) close() {
	_ = rc.conn.Close()
	for range rc.out { // let the pump end
	}
}

// amqpHeaders turns an AMQP header table into strings.
func amqpHeaders(t amqp.Table) map[string][]string {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string][]string, len(t))
	for k, v := range t {
		switch x := v.(type) {
		case string:
			out[k] = []string{x}
		case []byte:
			out[k] = []string{string(x)}
		default:
			out[k] = []string{fmt.Sprint(x)}
		}
	}
	return out
}

// testDialFunc opens a broker's TCP connection (tests wrap it to cut
// connections).
type testDialFunc = func(network, addr string) (net.Conn, error)
