package chaos

import (
	"io"
	"net"
	"sync"
)

// proxy is a TCP proxy to the database server on a local port: the cut
// scenario routes the workers through it and cuts every connection.
type proxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy listens on a free local port and forwards to upstream.
func startProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is where the proxy listens.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward pipes c to a new connection to the upstream until either side
// closes or the cut closes both.
func (p *proxy) forward(c net.Conn) {
	defer p.forget(c)
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.forget(up)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }() //nolint:errcheck // a cut ends it
	go func() { io.Copy(c, up); done <- struct{}{} }() //nolint:errcheck // a cut ends it
	<-done
	c.Close()
	up.Close()
	<-done
}

func (p *proxy) forget(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every connection and refuses new ones until Restore; it
// returns how many connections it closed (both sides counted once).
func (p *proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	n := len(p.conns)
	for c := range p.conns {
		c.Close()
	}
	return n / 2
}

// Restore lets connections through again.
func (p *proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
