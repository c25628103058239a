// Package logevent holds what keel's structured log events share: their
// attribute keys and the trace id read from a task's meta. One record is
// logged per task state change (see the engine's finished, the rescuer and
// Client.Cancel).
package logevent

import (
	"encoding/json"
	"strings"
)

// Attribute keys of keel's log records.
const (
	TaskID     = "task_id"
	Type       = "type"
	Queue      = "queue"
	Attempt    = "attempt"
	Node       = "node"
	DurationMS = "duration_ms"
	Outcome    = "outcome"
	Error      = "error"
	TraceID    = "trace_id"
	State      = "state" // the task's state after the change
)

// TraceparentKey is the task meta tag holding the W3C trace context of the
// request that enqueued the task.
const TraceparentKey = "traceparent"

// TraceIDFromMeta returns the trace id of the W3C traceparent tag in meta (a JSON
// object of string tags), or "" when there is none or it is malformed.
func TraceIDFromMeta(meta []byte) string {
	if len(meta) == 0 || !strings.Contains(string(meta), TraceparentKey) {
		return ""
	}
	var tags map[string]string
	if json.Unmarshal(meta, &tags) != nil {
		return ""
	}
	return parseTraceparent(tags[TraceparentKey])
}

// parseTraceparent returns the trace id of a W3C traceparent header value
// (version-traceid-parentid-flags, lowercase hex), or "".
func parseTraceparent(v string) string {
	parts := strings.Split(v, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || (parts[0] == "00" && len(parts) != 4) ||
		len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return ""
	}
	for _, p := range parts[:4] {
		if strings.Trim(p, "0123456789abcdef") != "" {
			return ""
		}
	}
	if strings.Trim(parts[1], "0") == "" || strings.Trim(parts[2], "0") == "" {
		return "" // all-zero ids are invalid
	}
	return parts[1]
}
