package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsConn consumes a durable JetStream consumer with explicit acks.
type natsConn struct {
	nc  *nats.Conn
	it  jetstream.MessagesContext
	out chan *delivery

	mu      sync.Mutex
	lastErr error
}

func (s *Source) dialNATS(ctx context.Context) (conn, error) {
	opts := []nats.Option{nats.Name("keel source " + s.cfg.Name), nats.Timeout(5 * time.Second), nats.NoReconnect()}
	if s.testDial != nil {
		opts = append(opts, nats.SetCustomDialer(dialFunc(s.testDial)))
	}
	nc, err := nats.Connect(s.cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", redactURL(s.cfg.URL), err)
	}
	n := &natsConn{nc: nc}
	if err := n.open(ctx, s); err != nil {
		nc.Close()
		return nil, err
	}
	return n, nil
}

// open finds (or creates) the stream, creates or updates the durable
// consumer, and starts pulling.
func (n *natsConn) open(ctx context.Context, s *Source) error {
	js, err := jetstream.New(n.nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, s.cfg.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		subject := s.cfg.Subject
		if subject == "" {
			subject = s.cfg.Stream + ".>"
		}
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: s.cfg.Stream, Subjects: []string{subject}}); err != nil {
			return fmt.Errorf("create stream %q: %w", s.cfg.Stream, err)
		}
		s.log.Info("source: created the JetStream stream", "stream", s.cfg.Stream, "subject", subject)
	} else if err != nil {
		return fmt.Errorf("find stream %q: %w", s.cfg.Stream, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, jetstream.ConsumerConfig{
		Durable: s.cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.cfg.AckWait,
		MaxAckPending: s.cfg.Prefetch, FilterSubject: s.cfg.Subject,
	})
	if err != nil {
		return fmt.Errorf("create consumer %q on stream %q: %w", s.cfg.Consumer, s.cfg.Stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(s.cfg.Prefetch), jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		return fmt.Errorf("pull from consumer %q: %w", s.cfg.Consumer, err)
	}
	n.it = it
	n.out = make(chan *delivery, s.cfg.Prefetch)
	n.nc.SetClosedHandler(func(*nats.Conn) { it.Stop() })
	go func() {
		defer close(n.out)
		for {
			m, err := it.Next()
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) || n.nc.IsClosed() {
					n.setErr(err)
				}
				return
			}
			n.out <- &delivery{body: m.Data(), headers: m.Headers(), received: time.Now(), msg: m, messageID: m.Headers().Get("Nats-Msg-Id")}
		}
	}()
	return nil
}

func (n *natsConn) setErr(err error) {
	n.mu.Lock()
	n.lastErr = err
	n.mu.Unlock()
}

func (n *natsConn) deliveries() <-chan *delivery { return n.out }

func (n *natsConn) err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lastErr == nil && n.nc.IsClosed() {
		return nats.ErrConnectionClosed
	}
	return n.lastErr
}

// ack acknowledges each message, then flushes so that the acks reached
// the server before the batch counts as done.
func (n *natsConn) ack(batch []*delivery) error {
	for _, d := range batch {
		if err := d.msg.(jetstream.Msg).Ack(); err != nil {
			return err
		}
	}
	return n.nc.FlushTimeout(5 * time.Second)
}

func (n *natsConn) nack(batch []*delivery, delay time.Duration) error {
	for _, d := range batch {
		if err := d.msg.(jetstream.Msg).NakWithDelay(delay); err != nil {
			return err
		}
	}
	return n.nc.FlushTimeout(5 * time.Second)
}

func (n *natsConn) close() {
	n.it.Stop()
	n.nc.Close()
	for range n.out {
	}
}

// dialFunc is a function as a nats.CustomDialer.
type dialFunc func(network, addr string) (net.Conn, error)

func (f dialFunc) Dial(network, addr string) (net.Conn, error) { return f(network, addr) }
