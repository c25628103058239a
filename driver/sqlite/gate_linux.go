package sqlite

import (
	"os"

	"golang.org/x/sys/unix"
)

// gate holds the gate file. Its locks are open file description locks
// (F_OFD_SETLK): they belong to this open file, not to the process, so
// two drivers of one process take turns as two processes do, and closing
// another descriptor of the file does not drop them.
type gate struct {
	f     *os.File
	fd    uintptr
	stuck bool // the last wait for a turn ran out (gatePatience)
}

// openGate opens (creating if needed) the gate file of the database at
// path, or returns nil if it cannot.
func openGate(path string) *gate {
	f, err := os.OpenFile(path+"-lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil
	}
	return &gate{f: f, fd: f.Fd()}
}

func (g *gate) tryLock(off int64) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	return unix.FcntlFlock(g.fd, unix.F_OFD_SETLK, &lk) == nil
}

func (g *gate) unlock(off int64) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: off, Len: 1}
	unix.FcntlFlock(g.fd, unix.F_OFD_SETLK, &lk) //nolint:errcheck // an unlock fails only on a bad descriptor
}

func (g *gate) close() {
	if g != nil {
		g.f.Close()
	}
}
