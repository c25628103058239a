// Package conv converts collections element by element: the root
// package's public types are copies of internal ones, converted on the
// way out.
package conv

// Slice returns f of each element of s, in order; nil when s is nil.
func Slice[T, R any](s []T, f func(T) R) []R {
	if s == nil {
		return nil
	}
	out := make([]R, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

// Rows returns f of a pointer to each element of s (rows read from a
// driver), in order; never nil, so that an empty list stays a list (it
// encodes as [] in JSON).
func Rows[T, R any](s []T, f func(*T) R) []R {
	out := make([]R, len(s))
	for i := range s {
		out[i] = f(&s[i])
	}
	return out
}

// Keys returns m with its keys converted to K (a string type, such as
// keel.State); never nil.
func Keys[K ~string, V any](m map[string]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[K(k)] = v
	}
	return out
}
