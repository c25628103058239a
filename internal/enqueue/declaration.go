package enqueue

import (
	"context"

	"github.com/keelq/keel/driver"
)

// Declaration returns the declaration that applies to taskType: this
// client's registration when it declares any default, else the stored
// one, which stored reads (nil: none).
func (p *Preparer) Declaration(ctx context.Context, stored StoredFunc, taskType string) (*driver.TypeDefaults, error) {
	if o, ok := p.Types[taskType]; ok && o.Declared() {
		t := o.TypeDefaults(taskType)
		return &t, nil
	}
	decl, err := stored(ctx, []string{taskType})
	if err != nil {
		return nil, err
	}
	return decl[taskType], nil
}
