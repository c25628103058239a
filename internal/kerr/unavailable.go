package kerr

import (
	"context"
	"errors"
	"fmt"

	"github.com/keelq/keel/driver"
)

// Unavailable wraps with driver.ErrUnavailable (keel.ErrUnavailable) a
// driver error that says the database could not be reached
// (driver.Unreachable). Drivers classify their own library's errors at
// their boundary; this is the fallback for an error that reached keel
// another way, such as from a caller's transaction. An error after ctx
// ended is the caller's, and is returned as it is; so is nil.
func Unavailable(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, driver.ErrUnavailable) || !driver.Unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", driver.ErrUnavailable, err)
}
