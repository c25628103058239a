package alerts

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelq/keel/driver"
)

// Figures are the parts of a keel.Alert decoded from its row.
type Figures struct {
	// Event is the event given, or, for "", the alert's state: fired
	// while open, else resolved.
	Event string
	// Values are the numbers the alert fired with; the current ones are
	// those of the latest evaluation, or those it fired with until they
	// changed.
	Values         map[string]any
	CurrentMessage string
	CurrentValues  map[string]any
	CurrentAt      time.Time
	Deliveries     []Delivery
}

// Delivery is one notifier's delivery of one event of an alert, with
// keel.AlertDelivery's fields: a new field is added to both.
type Delivery struct {
	Event       string
	Notifier    string
	Attempts    int
	DeliveredAt time.Time
	LastError   string
}

// FiguresOf decodes r's numbers as keel.Alert shows them, for event.
func FiguresOf(r *driver.AlertRow, event string) Figures {
	f := Figures{Event: event}
	if f.Event == "" {
		f.Event = driver.AlertFired
		if !r.Open() {
			f.Event = driver.AlertResolved
		}
	}
	if len(r.Values) > 0 {
		json.Unmarshal(r.Values, &f.Values) //nolint:errcheck // written by us as an object
	}
	f.CurrentMessage, f.CurrentValues, f.CurrentAt = r.Message, f.Values, r.FiredAt
	if r.CurrentMessage != "" {
		f.CurrentMessage, f.CurrentValues, f.CurrentAt = r.CurrentMessage, nil, r.CurrentAt
		if len(r.CurrentValues) > 0 {
			json.Unmarshal(r.CurrentValues, &f.CurrentValues) //nolint:errcheck // written by us as an object
		}
	}
	for _, d := range r.Deliveries {
		f.Deliveries = append(f.Deliveries, Delivery{Event: d.Event, Notifier: d.Notifier, Attempts: d.Attempts,
			DeliveredAt: d.DeliveredAt, LastError: d.LastError})
	}
	return f
}

// Inserter inserts tasks: a driver.
type Inserter interface {
	Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error)
}

// Insert inserts t into Queue, due at now, and tells wrote about the task
// unless it was a duplicate (its idempotency key held).
func (t Task) Insert(ctx context.Context, s Inserter, now time.Time, wrote func(*driver.TaskRow)) error {
	p, err := t.InsertParams(now)
	if err != nil {
		return err
	}
	res, err := s.Insert(ctx, []driver.InsertParams{p})
	if err != nil {
		return err
	}
	if !res[0].Duplicate {
		wrote(res[0].Task)
	}
	return nil
}
