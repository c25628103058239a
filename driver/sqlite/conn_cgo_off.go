//go:build keel_cgo_sqlite && !cgo

package sqlite

// The keel_cgo_sqlite tag builds SQLite's C source: it needs cgo. This
// name is undefined on purpose, so that the build stops here and says so.
var _ = keel_cgo_sqlite_needs_cgo__set_CGO_ENABLED_1_and_install_gcc
