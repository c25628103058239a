package driver

import "regexp"

// namePattern is keel's rule for the names of queues, types, nodes,
// schedules and broker sources.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ValidName reports whether s is a valid name of a queue, type, node,
// schedule or broker source: 1 to 128 letters, digits and _ . : -,
// starting with a letter or digit.
func ValidName(s string) bool { return namePattern.MatchString(s) }
