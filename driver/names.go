package driver

// ValidName reports whether s is a valid name of a queue, type, node,
// schedule or broker source: 1 to 128 letters, digits and _ . : -,
// starting with a letter or digit. (A byte loop: a regular expression cost
// a percent of every enqueue.)
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return true
}
