// Package httptarget runs keel tasks over HTTP, so that workers written in
// any language can serve them. A task type is bound to a URL (in `keel
// serve`, by configuration); each attempt of a task of that type POSTs the
// task's payload there, and the response decides the task's outcome.
//
//	h := keel.NewHandlers()
//	err := httptarget.Register(h, "invoice.render", httptarget.Target{
//		URL:     "https://render.internal/keel/invoice",
//		Headers: map[string]string{"Authorization": "Bearer " + token},
//	}, keel.MaxAttempts(5))
//
// # The request
//
// The body is the task's payload exactly as keel stores it (canonical
// JSON: object keys sorted, no insignificant whitespace), with these
// headers:
//
//	Content-Type:    application/json
//	Keel-Task-Id:    42              the task's id
//	Keel-Attempt:    1               1 on the first run, then 2, 3, ...
//	Keel-Delivery:   1               grows with every request for the task, never repeats
//	Keel-Fence:      1               the claim's fencing token (equal to Keel-Delivery), for durable steps
//	Keel-Task-Type:  invoice.render
//	Keel-Queue:      default
//	Idempotency-Key: keel-task-42    the same on every attempt of the task
//	User-Agent:      keel            unless Target.Headers sets another
//	traceparent:     00-…-…-01       the attempt's span (W3C trace context), when traced
//	tracestate:      …               with it, when the trace has one
//
// plus the target's own Target.Headers. The traceparent names the
// attempt's OpenTelemetry span, itself a child of the span that enqueued
// the task, so the target's own spans join the trace; an attempt without
// a trace sends neither header. A task runs at least once: an
// attempt can fail after the target did its work (a timeout, a lost
// connection, a crash of keel), and the task is then sent again. The
// Idempotency-Key identifies the task within its keel database, so a
// target that must not apply a task twice records the keys it has done and
// answers a repeat with 2xx without doing the work again. A dead-lettered
// task that an operator requeues keeps its key.
//
// Keel-Attempt counts the attempts the task's retry policy has used, and
// it can repeat: when keel stops gracefully and cuts a request off, the
// task is released without using its attempt, and the next request
// carries the same Keel-Attempt. To tell deliveries apart, use
// Keel-Delivery: it numbers every request keel sends for the task (it
// counts the task's claims, so numbers can be skipped) and is never reused,
// also across retries and requeues. Keel-Task-Id and Keel-Delivery together
// name one delivery: a target still working on delivery 3 of a task that
// receives delivery 4 knows the earlier request was given up.
//
// # Durable steps
//
// A target that does long work in steps can record each finished step
// with keel, as a Go handler does with keel.Step, so that a retried or
// rescued delivery resumes after the last finished step instead of
// starting over. Through the API of `keel serve` (a token of role enqueue
// suffices):
//
//   - GET /v1/tasks/{id} returns the steps stored so far in its "steps"
//     field (name, result, at, attempt); the target skips those and reuses
//     their results.
//   - POST /v1/tasks/{id}/steps with {"name": "...", "fence": <Keel-Fence>,
//     "result": <JSON>} stores a finished step. It applies only while the
//     task is still running under that delivery's claim: 409 otherwise
//     (the delivery was given up and the task sent again, or it was
//     cancelled), and nothing is stored. A task's step results take at
//     most 1 MiB in all.
//
// Steps are not sent with the request: a target that uses them reads
// them with the GET, once per delivery that is not the task's first
// (Keel-Delivery above 1).
//
// # The response
//
//   - 2xx: the task succeeded. A body that is valid JSON and at most
//     Target.MaxResultBytes long (default 64 KiB) is stored as the task's
//     result (compacted); any other body is read and discarded, and the
//     task succeeds without a result.
//   - 408, 429 and 5xx: the attempt failed and is retried with the type's
//     backoff, or after the delay in a Retry-After header (delta-seconds
//     or an HTTP-date, at most 24h) when the response has one. When no
//     attempts remain the task is dead-lettered.
//   - 3xx: redirects are not followed; the binding points at the wrong
//     URL, so the task is dead-lettered at once.
//   - any other status (400, 401, 404, 422, ...): the task can never
//     succeed as it is, so it is dead-lettered at once (outcome
//     permanent). Fix the cause and requeue it.
//
// The error recorded in the task's history names the status, the URL and
// the first 200 bytes of the body: "HTTP 503 from https://host/path:
// overloaded". URLs in messages leave out userinfo and the query string.
//
// # Timeouts and connection errors
//
// Every attempt is bounded three ways: Target.ConnectTimeout (default 2s)
// covers the TCP connect and the TLS handshake; Target.ReadTimeout
// (default 10s) runs from the connection being ready until the whole
// response, body included, has been read; and the task's own timeout
// (keel.Timeout, default 60s) bounds the attempt as a whole. Failures are
// recorded by kind and retried; connect and read timeouts with outcome
// timeout, the others with outcome error:
//
//	connect to render.internal:443: connection refused
//	connect timeout after 2s (POST https://render.internal/keel/invoice)
//	read timeout after 10s: no response (POST https://render.internal/keel/invoice)
//	read timeout after 10s: body incomplete (POST https://render.internal/keel/invoice)
//
// The whole response must arrive in time: a 2xx status whose body is cut
// off or still streaming at the read timeout fails the attempt too, and
// the task is sent again (with the same Idempotency-Key).
//
// A target that needs longer than ReadTimeout should answer 202 at once
// and do the work in the background, or be given a longer ReadTimeout
// (and task timeout).
//
// Each Target has its own http.Client, which keeps connections alive
// between tasks and uses the proxy from the environment (HTTP_PROXY,
// HTTPS_PROXY, NO_PROXY) like Go's default client.
package httptarget
