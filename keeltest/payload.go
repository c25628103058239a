package keeltest

import (
	"encoding/json"
	"fmt"

	"github.com/keelq/keel/internal/digest"
)

// encodePayload encodes payload the way Client.Enqueue does: []byte and
// json.RawMessage are taken as JSON already, nil is {}, anything else is
// marshalled.
func encodePayload(payload any) ([]byte, error) {
	switch v := payload.(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	case nil:
		return []byte("{}"), nil
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("payload cannot be encoded as JSON: %w", err)
	}
	return b, nil
}

// canonical is the form Enqueue stores: keys sorted, no insignificant
// whitespace, numbers as written.
func canonical(raw []byte) ([]byte, error) { return digest.Canonical(raw) }
