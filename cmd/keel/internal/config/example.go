package config

import _ "embed"

// Example is a keel.toml with every setting at its default and a comment
// on each, for `keel config example`.
//
//go:embed keel.example.toml
var Example string
