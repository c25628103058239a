// Package sourcemap turns a broker message into what a task needs: it
// checks the body and reads the natural key a source's key spec names.
// Package keel/source uses it for every message, the Client for a
// resubmitted one.
package sourcemap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// HeaderPrefix starts a key spec that reads a message header.
const HeaderPrefix = "header:"

// MaxKey is the longest natural key taken from a message, in bytes.
const MaxKey = 1000

// ErrReject marks an error that says why a message cannot become a task
// (its text is the reason stored with it).
var ErrReject = errors.New("message rejected")

// ValidateSpec checks a key spec: a JSON pointer ("/order_id",
// "/customer/id", RFC 6901) or "header:NAME".
func ValidateSpec(spec string) error {
	switch {
	case spec == "":
		return errors.New(`key is required: a JSON pointer into the body ("/order_id") or "header:NAME"`)
	case strings.HasPrefix(spec, HeaderPrefix):
		name := strings.TrimPrefix(spec, HeaderPrefix)
		if name == "" || strings.ContainsAny(name, " \t\r\n:") {
			return fmt.Errorf("key %q: the header name must be non-empty, without spaces or colons", spec)
		}
	case strings.HasPrefix(spec, "/"):
		if _, err := pointerTokens(spec); err != nil {
			return fmt.Errorf("key %q: %w", spec, err)
		}
	default:
		return fmt.Errorf(`key %q: must be a JSON pointer starting with "/" or "header:NAME"`, spec)
	}
	if len(spec) > MaxKey {
		return fmt.Errorf("key spec of %d bytes is over %d", len(spec), MaxKey)
	}
	return nil
}

// Header finds a message header's value by name; ok is false when the
// message has none.
type Header func(name string) (value string, ok bool)

// Headers is the Header of a message's headers, found by name whatever
// its case. messageID, when not empty, is the broker's own message id
// (RabbitMQ's message_id property): it answers "message-id" and
// "message_id" when no header has that name.
func Headers(h map[string][]string, messageID string) Header {
	return func(name string) (string, bool) {
		for k, v := range h {
			if strings.EqualFold(k, name) && len(v) > 0 {
				return v[0], true
			}
		}
		if messageID != "" && (strings.EqualFold(name, "message-id") || strings.EqualFold(name, "message_id")) {
			return messageID, true
		}
		return "", false
	}
}

// Message checks body and returns the natural key spec names. body must
// be JSON and at most maxBody bytes. An error wraps ErrReject, and its
// text is the reason to store.
func Message(spec string, body []byte, maxBody int, header Header) (key string, err error) {
	if len(body) > maxBody {
		return "", rejectf("body of %d bytes is over the limit of %d", len(body), maxBody)
	}
	if !json.Valid(body) {
		return "", rejectf("body is not JSON")
	}
	if name, ok := strings.CutPrefix(spec, HeaderPrefix); ok {
		v, found := "", false
		if header != nil {
			v, found = header(name)
		}
		if !found || v == "" {
			return "", rejectf("no key: the message has no header %q", name)
		}
		return checkKey(v)
	}
	return Pointer(spec, body)
}

// Pointer reads the natural key at JSON pointer spec in body: a string, or
// a number as written. An error wraps ErrReject.
func Pointer(spec string, body []byte) (string, error) {
	tokens, err := pointerTokens(spec)
	if err != nil {
		return "", rejectf("no key: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", rejectf("body is not JSON")
	}
	for _, t := range tokens {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[t]
			if !ok {
				return "", rejectf("no key: nothing at %s in the body", spec)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(node) || (len(t) > 1 && t[0] == '0') {
				return "", rejectf("no key: nothing at %s in the body", spec)
			}
			v = node[i]
		default:
			return "", rejectf("no key: nothing at %s in the body", spec)
		}
	}
	switch k := v.(type) {
	case string:
		return checkKey(k)
	case json.Number:
		return checkKey(k.String())
	case nil:
		return "", rejectf("no key: %s is null", spec)
	}
	return "", rejectf("no key: %s is not a string or a number", spec)
}

func checkKey(k string) (string, error) {
	switch {
	case k == "":
		return "", rejectf("no key: the key is empty")
	case len(k) > MaxKey:
		return "", rejectf("no key: the key of %d bytes is over %d", len(k), MaxKey)
	}
	return k, nil
}

// pointerTokens splits an RFC 6901 pointer into its unescaped tokens.
func pointerTokens(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("a JSON pointer starts with /")
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, fmt.Errorf("~ must be followed by 0 or 1 in %q", p)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func rejectf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrReject, fmt.Sprintf(format, args...))
}

// Reason is the text stored for a rejection: err's message without the
// ErrReject prefix.
func Reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrReject.Error()+": ")
}
