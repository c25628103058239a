package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(removeBuilt{m}) }

// removeBuilt removes the keel binary the tests built once they have run.
type removeBuilt struct{ m *testing.M }

func (r removeBuilt) Run() int {
	defer func() {
		if built.dir != "" {
			os.RemoveAll(built.dir)
		}
	}()
	return r.m.Run()
}
