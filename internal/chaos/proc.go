package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// buffer is a bytes.Buffer safe to write from exec and read at once.
type buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last n bytes written.
func (b *buffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// proc is one worker process.
type proc struct {
	node   string
	cmd    *exec.Cmd
	stderr *buffer
	exited chan struct{} // closed once the process is gone
}

// startProc runs cmd and returns once it printed "ready" on stdout.
func startProc(node string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{node: node, cmd: cmd, stderr: &buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", node, err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			if sc.Text() == "ready" {
				once.Do(func() { close(ready) })
			}
		}
		cmd.Wait() //nolint:errcheck // killed, or its stderr tells
		close(p.exited)
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("worker %s exited before it was ready: %s", node, p.stderr.tail(2000))
	case <-time.After(30 * time.Second):
		p.kill()
		return nil, fmt.Errorf("worker %s not ready after 30s: %s", node, p.stderr.tail(2000))
	}
}

// signal sends sig; it returns the time just before.
func (p *proc) signal(sig syscall.Signal) time.Time {
	at := time.Now()
	p.cmd.Process.Signal(sig) //nolint:errcheck // it may have exited; alive() tells
	return at
}

// kill SIGKILLs the process and waits until it is gone; it returns the
// time just before the signal.
func (p *proc) kill() time.Time {
	at := p.signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
	return at
}

// wait waits up to d for the process to exit and reports whether it did.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// alive reports whether the process still runs.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}
