package httptarget_test

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// fullListener returns the address of a listener that never accepts and
// whose accept queue is full, so that a new dial gets no answer to its SYN
// and times out. Linux queues backlog+1 connections: with a backlog of 0,
// one connection fills the queue. The test is skipped if a dial still
// succeeds.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 8 {
		conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return addr // the queue is full: dials time out from now on
		}
		t.Cleanup(func() { conn.Close() })
	}
	t.Skip("the listener's accept queue never filled: cannot make a dial time out")
	return ""
}
