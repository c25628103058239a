package keel

import (
	"context"
	"encoding/json"

	"github.com/keelq/keel/internal/engine"
)

// CompleteTx marks the task whose handler ctx belongs to as succeeded inside
// the caller's transaction, so the handler's own writes and the completion
// commit together or not at all (effectively-once effects). result, when
// not nil, is stored as the task's result.
//
// Call it from a handler with the handler's ctx, on a transaction of the
// same database (for SQLite, begun on the driver's DB()), then commit and
// return nil. If the task is no longer held by this worker (its lease was
// taken over or it was cancelled) it returns ErrLeaseLost: roll back.
func CompleteTx(ctx context.Context, tx Tx, result any) error {
	if !engine.InHandler(ctx) {
		return ErrNotInHandler
	}
	if tx == nil {
		return invalid("nil transaction")
	}
	var b []byte
	if result != nil {
		var err error
		if b, err = json.Marshal(result); err != nil {
			return invalid("result cannot be encoded as JSON: %v", err)
		}
	}
	_, err := engine.CompleteTx(ctx, tx, b)
	return err
}
