// Package crashtest proves keel's crash promises with real processes: its
// tests start workers as subprocesses (the test binary re-executed), kill
// them with SIGKILL and check that nothing was lost, nothing stuck and
// nothing applied twice. It has no API; everything is in its tests.
package crashtest
