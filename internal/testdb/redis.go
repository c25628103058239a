package testdb

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PrivateRedisService is a redis-server of a test's own.
var PrivateRedisService = &Service{Name: "a private Redis (redis-server)", Env: "PATH", probe: func() error {
	_, err := exec.LookPath("redis-server")
	return err
}}

// A RedisServer is a redis-server of one test's own, on a free port of
// 127.0.0.1, without persistence: the test may freeze or kill it without
// disturbing any other test or the machine's own Redis. It is resumed and
// killed when the test ends.
type RedisServer struct {
	Addr string // host:port

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{}
	frozen bool
}

// PrivateRedis starts a redis-server of the test's own and returns once it
// accepts connections. It skips the test when redis-server is not
// installed (fails it under CI=true).
func PrivateRedis(t testing.TB) *RedisServer {
	t.Helper()
	Require(t, PrivateRedisService)
	port := freePort(t)
	s := &RedisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), exited: make(chan struct{})}
	s.proc = exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", t.TempDir())
	if err := s.proc.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go func() { s.proc.Wait(); close(s.exited) }() //nolint:errcheck // its exit is seen through exited
	t.Cleanup(s.Kill)
	if err := waitDial(s.Addr, 30*time.Second); err != nil {
		t.Fatalf("redis-server on %s not accepting connections: %v", s.Addr, err)
	}
	return s
}

// Freeze stops the server with SIGSTOP: connections stay open, nothing is
// answered (a hung Redis).
func (s *RedisServer) Freeze() error { return s.signal(syscall.SIGSTOP, true) }

// Thaw resumes a frozen server with SIGCONT.
func (s *RedisServer) Thaw() error { return s.signal(syscall.SIGCONT, false) }

func (s *RedisServer) signal(sig syscall.Signal, frozen bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.Process.Signal(sig); err != nil {
		return fmt.Errorf("redis-server %s: %v: %w", s.Addr, sig, err)
	}
	s.frozen = frozen
	return nil
}

// Kill resumes the server if frozen, kills it and waits until it is gone;
// safe to call more than once.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.exited:
		return
	default:
	}
	if s.frozen {
		s.proc.Process.Signal(syscall.SIGCONT) //nolint:errcheck // killed next anyway
		s.frozen = false
	}
	s.proc.Process.Kill() //nolint:errcheck // it may have exited
	<-s.exited
}
