package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/keelq/keel/driver/sqlite"
)

// TestGateHeldByStoppedProcess: a process stopped (SIGSTOP) while it holds
// the writers' gate must not hold up the other processes' writes for more
// than the gate's patience (2s), once: after it, they wait for the gate at
// most 100ms per write until they get it again. Here the test holds the gate's
// write lock as that process would.
func TestGateHeldByStoppedProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keel.db")
	d := openAt(t, path, sqlite.Options{})
	f, err := os.OpenFile(path+"-lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the gate file: %v", err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 1, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	insertN(t, d, "default", 1, start)
	if took := time.Since(start); took < 1900*time.Millisecond || took > 6*time.Second {
		t.Fatalf("the first write with the gate held took %v, want the gate's patience (2s)", took)
	}
	for i := range 5 {
		start := time.Now()
		insertN(t, d, "default", 1, start)
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Fatalf("write %d after the gate's patience ran out took %v: it waited for the gate again", i+2, took)
		}
	}
	lk.Type = unix.F_UNLCK
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	insertN(t, d, "default", 1, time.Now()) // the gate is free again
}
