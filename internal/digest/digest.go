// Package digest canonicalises JSON payloads and derives idempotency keys
// from them (seed 000 §2.2: natural key plus content digest).
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

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

// ExplicitKeyOf returns the caller's own key a stored key holds, or "" for
// a key UniqueKey made or none.
func ExplicitKeyOf(stored string) string {
	if k, ok := strings.CutPrefix(stored, "k:"); ok {
		return k
	}
	return ""
}

// UniqueDigestOf returns a stored key UniqueKey made, or "".
func UniqueDigestOf(stored string) string {
	if strings.HasPrefix(stored, "u:") {
		return stored
	}
	return ""
}
