//go:build !linux

package sqlite

// gate is not implemented here: writers rely on SQLite's busy handler
// alone (see gate.go).
type gate struct{ stuck bool }

func openGate(string) *gate { return nil }

func (g *gate) tryLock(int64) bool { return true }
func (g *gate) unlock(int64)       {}
func (g *gate) close()             {}
