// Package kerr holds the sentinel errors of rejected input that the root
// package exports and its internal packages return, so that errors.Is
// matches whichever package made the error.
package kerr

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/keelq/keel/internal/shorten"
)

// The sentinels; package keel exports each under the same name.
var (
	ErrInvalid         = errors.New("keel: invalid input")
	ErrUnknownType     = errors.New("keel: unknown task type")
	ErrPayloadTooLarge = errors.New("keel: payload too large")
)

// MaxEcho bounds how much of one rejected string an error repeats.
const MaxEcho = 128

// Invalid returns an ErrInvalid error; string arguments longer than
// MaxEcho bytes are shortened, so an error never echoes a huge input.
func Invalid(format string, args ...any) error {
	short := make([]any, len(args))
	for i, a := range args {
		short[i] = a
		if v := reflect.ValueOf(a); v.Kind() == reflect.String && v.Len() > MaxEcho {
			short[i] = shorten.String(v.String(), MaxEcho)
		}
	}
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, short...))
}
