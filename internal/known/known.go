// Package known hands what a keel.Client is configured for — the queues
// it works, the task types it handles or declares, its schedules — to
// keel's own observers (package metrics), which export a zero for each
// before anything happened, without a method on keel.Client for it.
package known

// Work is what a client is configured for. keel's reserved queue and
// types are left out.
type Work struct {
	// Queues are the queues the client works (Config.Queues) and the
	// queues of its types, sorted.
	Queues []string
	// Types are the types it handles or declares, sorted by name.
	Types []Type
	// Schedules are the names of its schedules (Config.Schedules), sorted.
	Schedules []string
}

// Type is one task type of a client.
type Type struct {
	Name string
	// Queue is the type's queue: its Queue option, or the default queue
	// for a handled type without one; "" for a type declared only in
	// Config.Types, whose queue another process decides.
	Queue string
}

// Receiver is an observer that wants to know a client's Work:
// keel.Client.Observe hands it over when it registers the observer.
type Receiver interface {
	KnownWork(Work)
}
