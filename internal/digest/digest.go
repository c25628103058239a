// Package digest canonicalises JSON payloads and derives idempotency keys
// from them (seed 000 §2.2: natural key plus content digest).
package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxDepth is the deepest nesting a payload may have.
const MaxDepth = 64

// Canonical returns payload re-encoded with object keys sorted, no
// insignificant whitespace and numbers kept exactly as written.
func Canonical(payload []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("payload is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("payload is not valid JSON: more than one value")
	}
	if depth(v) > MaxDepth {
		return nil, fmt.Errorf("payload is nested deeper than %d levels", MaxDepth)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func depth(v any) int {
	switch x := v.(type) {
	case map[string]any:
		m := 0
		for _, e := range x {
			m = max(m, depth(e))
		}
		return m + 1
	case []any:
		m := 0
		for _, e := range x {
			m = max(m, depth(e))
		}
		return m + 1
	}
	return 0
}

// Sum returns the hex SHA-256 of the canonical payload.
func Sum(canonical []byte) string {
	s := sha256.Sum256(canonical)
	return hex.EncodeToString(s[:])
}

// UniqueKey is the key of UniqueBy: SHA-256 over type, natural key and the
// canonical payload, so the same content under the same natural key maps to
// one task and changed content is new work.
func UniqueKey(taskType, naturalKey string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(taskType))
	h.Write([]byte{0})
	h.Write([]byte(naturalKey))
	h.Write([]byte{0})
	h.Write(canonical)
	return "u:" + hex.EncodeToString(h.Sum(nil))
}

// ExplicitKey namespaces a caller's own idempotency key.
func ExplicitKey(key string) string { return "k:" + key }
