package known

import (
	"maps"
	"slices"
	"strings"
)

// Client is what Of reads of a client's configuration.
type Client struct {
	// Queues are the queues the client works (its Config.Queues).
	Queues []string
	// Keel are keel's own types the client runs (alert deliveries, the
	// drill), all in the Reserved queue: their metrics have their own
	// families.
	Keel []string
	// Types are the user's types the client handles or declares.
	Types []Declared
	// Schedules are the names of the client's schedules.
	Schedules []string
	// Reserved is keel's own queue, never listed among the queues;
	// Default is the queue of a handled type without a Queue option.
	Reserved, Default string
}

// Declared is one of a client's task types.
type Declared struct {
	Name string
	// Queue is the type's Queue option; nil when it has none.
	Queue *string
	// Handled: the client has a handler for the type.
	Handled bool
}

// Of is the Work of client c.
func Of(c Client) Work {
	var w Work
	queues := map[string]bool{}
	for _, q := range c.Queues {
		queues[q] = true
	}
	for _, name := range c.Keel {
		w.Types = append(w.Types, Type{Name: name, Queue: c.Reserved})
	}
	for _, d := range c.Types {
		t := Type{Name: d.Name}
		switch {
		case d.Queue != nil:
			t.Queue = *d.Queue
		case d.Handled:
			t.Queue = c.Default // a handled type runs there unless told otherwise
		}
		if t.Queue != "" {
			queues[t.Queue] = true
		}
		w.Types = append(w.Types, t)
	}
	delete(queues, c.Reserved)
	w.Queues = slices.Sorted(maps.Keys(queues))
	slices.SortFunc(w.Types, func(a, b Type) int { return strings.Compare(a.Name, b.Name) })
	w.Schedules = slices.Sorted(slices.Values(c.Schedules))
	return w
}
