// Package proctest runs worker processes for keel's crash tests: it starts
// a command, waits for it to print "ready", kills it with SIGKILL and keeps
// its stderr for the test's failure report.
package proctest

import (
	"bufio"
	"bytes"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe to write from exec and read from the test
// at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Proc is one running process.
type Proc struct {
	Name   string
	Cmd    *exec.Cmd
	Stderr *Buffer
	Exited chan struct{} // closed once the process is gone
}

// Start runs cmd and returns once it printed a line "ready" on stdout. The
// process is killed when the test ends; if the test failed, the end of its
// stderr is logged.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Stderr: &Buffer{}, Exited: make(chan struct{})}
	cmd.Stderr = p.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
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
		cmd.Wait() //nolint:errcheck // killed, or the test reports its stderr
		close(p.Exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited
		<-p.Exited
		if t.Failed() {
			t.Logf("process %s stderr (last 4 kB):\n%s", name, Tail(p.Stderr.String(), 4096))
		}
	})
	select {
	case <-ready:
	case <-p.Exited:
		t.Fatalf("process %s exited before it was ready:\n%s", name, p.Stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("process %s not ready after 30s:\n%s", name, p.Stderr.String())
	}
	return p
}

// Kill SIGKILLs the process and waits until it is gone; it returns the time
// just before the signal.
func (p *Proc) Kill(t testing.TB) time.Time {
	t.Helper()
	at := time.Now()
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("process %s still running 10s after SIGKILL", p.Name)
	}
	return at
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
