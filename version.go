package keel

import "runtime/debug"

// moduleVersion is keel's module version in this program's build
// information: the version of the github.com/keelq/keel dependency, or
// the main module's when the program is built from keel's own tree (a
// pseudo-version with the commit for go build in a checkout); "" when the
// build carries none (go run, go test).
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	const path = "github.com/keelq/keel"
	if bi.Main.Path == path {
		if v := bi.Main.Version; v != "(devel)" {
			return v
		}
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}
