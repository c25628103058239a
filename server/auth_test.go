package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
)

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	drv, err := sqlite.Open(t.Context(), t.TempDir()+"/keel.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	c, err := keel.NewClient(keel.Config{Driver: drv})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		client *keel.Client
		opts   Options
		want   string
	}{
		"nil client":       {nil, Options{}, "nil keel.Client"},
		"empty token":      {c, Options{Tokens: []Token{{Value: "a", Role: RoleRead}, {Value: "", Role: RoleAdmin}}}, "Tokens[1]: empty token value"},
		"unknown role":     {c, Options{Tokens: []Token{{Value: "a", Role: "root"}}}, `Tokens[0]: unknown role "root"`},
		"no role":          {c, Options{Tokens: []Token{{Value: "a"}}}, `unknown role ""`},
		"duplicate token":  {c, Options{Tokens: []Token{{Value: "a", Role: RoleRead}, {Value: "b", Role: RoleRead}, {Value: "a", Role: RoleAdmin}}}, "Tokens[2]: same value as Tokens[0]"},
		"token with space": {c, Options{Tokens: []Token{{Value: "a b", Role: RoleRead}}}, "space or control character"},
		"negative body":    {c, Options{MaxBodyBytes: -1}, "MaxBodyBytes"},
		"negative batch":   {c, Options{MaxBatch: -1}, "MaxBatch"},
	} {
		h, err := New(c.client, c.opts)
		if err == nil || h != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New returned %v, %v; want an error containing %q", name, h, err, c.want)
		}
	}
	if _, err := New(c, Options{Tokens: []Token{{Value: "a", Role: RoleAdmin}, {Value: "b", Role: RoleEnqueue}, {Value: "c", Role: RoleRead}}}); err != nil {
		t.Fatal(err)
	}
}

// roleRules is the access policy, written out independently of the route
// table: who may call each route (nil: no token needed).
var roleRules = map[string][]Role{
	"GET /healthz":                  nil,
	"GET /readyz":                   nil,
	"GET /v1/openapi.json":          nil,
	"POST /v1/tasks":                {RoleAdmin, RoleEnqueue},
	"POST /v1/tasks/batch":          {RoleAdmin, RoleEnqueue},
	"GET /v1/tasks/{id}":            {RoleAdmin, RoleEnqueue, RoleRead},
	"GET /v1/tasks":                 {RoleAdmin, RoleRead},
	"POST /v1/tasks/{id}/cancel":    {RoleAdmin},
	"POST /v1/tasks/{id}/retry":     {RoleAdmin},
	"POST /v1/tasks/{id}/steps":     {RoleAdmin, RoleEnqueue},
	"GET /v1/dead":                  {RoleAdmin, RoleRead},
	"POST /v1/dead/requeue":         {RoleAdmin},
	"POST /v1/dead/purge":           {RoleAdmin},
	"GET /v1/queues":                {RoleAdmin, RoleRead},
	"POST /v1/queues/{name}/pause":  {RoleAdmin},
	"POST /v1/queues/{name}/resume": {RoleAdmin},
	"PATCH /v1/queues/{name}":       {RoleAdmin},
	"GET /v1/types":                 {RoleAdmin, RoleRead},
	"POST /v1/types/{name}/pause":   {RoleAdmin},
	"POST /v1/types/{name}/resume":  {RoleAdmin},
	"PATCH /v1/types/{name}":        {RoleAdmin},
	"GET /v1/stats":                 {RoleAdmin, RoleRead},
	"GET /v1/nodes":                 {RoleAdmin, RoleRead},
	"GET /v1/system":                {RoleAdmin, RoleRead},
	"GET /metrics":                  {RoleAdmin, RoleRead},
	"GET /v1/alerts":                {RoleAdmin, RoleRead},
	"GET /v1/alerts/{id}":           {RoleAdmin, RoleRead},
	"GET /v1/alerts/rules":          {RoleAdmin, RoleRead},
	"PATCH /v1/alerts/rules":        {RoleAdmin},
	"DELETE /v1/alerts/rules":       {RoleAdmin},
	"POST /v1/drill":                {RoleAdmin},

	// Batches.
	"POST /v1/batches":            {RoleAdmin, RoleEnqueue},
	"POST /v1/batches/{id}/tasks": {RoleAdmin, RoleEnqueue},
	"POST /v1/batches/{id}/seal":  {RoleAdmin, RoleEnqueue},
	"GET /v1/batches/{id}":        {RoleAdmin, RoleRead},
	"GET /v1/batches":             {RoleAdmin, RoleRead},
	"GET /v1/batches/{id}/tasks":  {RoleAdmin, RoleRead},

	// Workflows.
	"POST /v1/workflows":     {RoleAdmin, RoleEnqueue},
	"GET /v1/workflows/{id}": {RoleAdmin, RoleRead},
	"GET /v1/workflows":      {RoleAdmin, RoleRead},

	// The automatic brake.
	"POST /v1/types/{name}/brake/close": {RoleAdmin},
	"PUT /v1/types/{name}/brake":        {RoleAdmin},
	"GET /v1/brakes":                    {RoleAdmin, RoleRead},
	"GET /v1/sequences/blocked":         {RoleAdmin, RoleRead},

	// Periodic tasks.
	"GET /v1/schedules":                 {RoleAdmin, RoleRead},
	"POST /v1/schedules/{name}/pause":   {RoleAdmin},
	"POST /v1/schedules/{name}/resume":  {RoleAdmin},
	"POST /v1/schedules/{name}/trigger": {RoleAdmin},
	"DELETE /v1/schedules/{name}":       {RoleAdmin},

	// Broker sources and their rejected messages.
	"GET /v1/sources":                 {RoleAdmin, RoleRead},
	"GET /v1/rejected":                {RoleAdmin, RoleRead},
	"GET /v1/rejected/{id}":           {RoleAdmin, RoleRead},
	"POST /v1/rejected/{id}/resubmit": {RoleAdmin},
	"DELETE /v1/rejected/{id}":        {RoleAdmin},

	// Limits and ramps.
	"GET /v1/types/{name}/ramp":       {RoleAdmin, RoleRead},
	"PUT /v1/types/{name}/ramp":       {RoleAdmin},
	"POST /v1/types/{name}/ramp/stop": {RoleAdmin},
}

// servedRoutes are the patterns the API serves.
func servedRoutes() []string {
	var out []string
	for _, rt := range (&server{}).routes() {
		out = append(out, rt.pattern)
	}
	return out
}

// concrete turns a route pattern into a request path and a body.
func concrete(pattern string) (method, path, body string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.NewReplacer("{id}", "1", "{name}", typeEmail).Replace(path)
	switch pattern {
	case "POST /v1/tasks":
		body = `{"type":"email.send"}`
	case "POST /v1/tasks/batch":
		body = `{"tasks":[{"type":"email.send"}]}`
	case "POST /v1/batches":
		body = `{"tasks":[{"type":"email.send"}]}`
	case "POST /v1/batches/{id}/tasks":
		body = `{"tasks":[{"type":"email.send"}]}`
	case "POST /v1/workflows":
		body = `{"name":"w","tasks":[{"name":"a","type":"email.send"}]}`
	case "POST /v1/dead/requeue", "POST /v1/dead/purge":
		body = `{}`
	case "PATCH /v1/queues/{name}", "PATCH /v1/types/{name}":
		body = `{"paused":false}`
	case "PUT /v1/types/{name}/brake":
		body = `{"window":10}`
	case "PATCH /v1/alerts/rules":
		body = `{"dead_per_hour":5}`
	case "PUT /v1/types/{name}/ramp":
		body = `{"steps":[1,2]}`
	case "POST /v1/drill":
		body = `{"timeout":"1s"}`
	case "POST /v1/tasks/{id}/steps":
		body = `{"name":"s","fence":1,"result":1}`
	}
	return method, path, body
}

func TestAuth(t *testing.T) {
	t.Parallel()
	routes := servedRoutes()
	if !slices.Equal(slices.Sorted(func(yield func(string) bool) {
		for k := range roleRules {
			if !yield(k) {
				return
			}
		}
	}), slices.Sorted(slices.Values(routes))) {
		t.Fatalf("roleRules does not list exactly the served routes %v", routes)
	}
	tokens := map[Role]string{RoleAdmin: "admin-token", RoleEnqueue: "enqueue-token", RoleRead: "read-token-longer-than-the-others"}
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: []Token{
			{Value: tokens[RoleAdmin], Role: RoleAdmin},
			{Value: tokens[RoleEnqueue], Role: RoleEnqueue},
			{Value: tokens[RoleRead], Role: RoleRead},
		}})
		b.enqueue(t, `{"type":"email.send"}`) // task 1
		for _, pattern := range routes {
			allowed := roleRules[pattern]
			method, path, body := concrete(pattern)
			for _, who := range []string{"none", "bad", "bad-prefix", "basic", string(RoleRead), string(RoleEnqueue), string(RoleAdmin)} {
				var auth string
				switch who {
				case "none":
				case "bad":
					auth = "Bearer not-a-token"
				case "bad-prefix":
					auth = "Bearer " + tokens[RoleAdmin][:5]
				case "basic":
					auth = "Basic " + tokens[RoleAdmin]
				default:
					auth = "Bearer " + tokens[Role(who)]
				}
				before := b.state(t)
				res := b.call(t, method, path, body, "Authorization", auth)
				switch {
				case allowed == nil || slices.Contains(allowed, Role(who)):
					if res.status == http.StatusUnauthorized || res.status == http.StatusForbidden || res.status >= 500 {
						t.Errorf("%s as %s: %d %s", pattern, who, res.status, res.body)
					}
				case who == "none" || strings.HasPrefix(who, "bad") || who == "basic":
					res.problem(t, http.StatusUnauthorized, "bearer token")
					if got := res.header.Get("WWW-Authenticate"); got != "Bearer" {
						t.Errorf("%s as %s: WWW-Authenticate %q", pattern, who, got)
					}
					b.unchanged(t, before)
				default:
					res.problem(t, http.StatusForbidden, `role "`+who+`" may not call `+pattern)
					b.unchanged(t, before)
				}
			}
		}
		// The scheme is case-insensitive.
		b.call(t, "GET", "/v1/stats", "", "Authorization", "bearer "+tokens[RoleRead]).ok(t, http.StatusOK, nil)
	})
}

func TestNoTokensOpensEveryRoute(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send"}`)
		for _, pattern := range servedRoutes() {
			method, path, body := concrete(pattern)
			res := b.call(t, method, path, body, "Authorization", "")
			if res.status == http.StatusUnauthorized || res.status == http.StatusForbidden || res.status >= 500 {
				t.Errorf("%s without tokens: %d %s", pattern, res.status, res.body)
			}
		}
	})
}

func TestCrossOriginRequests(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		task := `{"type":"email.send"}`
		refuse(t, b, []badCall{
			{name: "cross-site POST", method: "POST", path: "/v1/tasks", body: task, hdr: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, detail: "cross-origin request rejected"},
			{name: "same-site POST", method: "POST", path: "/v1/tasks", body: task, hdr: []string{"Sec-Fetch-Site", "same-site"}, status: 403, detail: "cross-origin"},
			{name: "foreign Origin", method: "POST", path: "/v1/tasks", body: task, hdr: []string{"Origin", "https://evil.example"}, status: 403, detail: "cross-origin"},
			{name: "cross-site PATCH", method: "PATCH", path: "/v1/queues/default", body: `{"paused":true}`, hdr: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, detail: "cross-origin"},
			{name: "cross-site cancel", method: "POST", path: "/v1/tasks/1/cancel", hdr: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, detail: "cross-origin"},
		})
		// Same-origin browsers and non-browser clients may change state;
		// anyone may read.
		b.call(t, "POST", "/v1/tasks", task, "Sec-Fetch-Site", "same-origin").ok(t, http.StatusCreated, nil)
		b.call(t, "POST", "/v1/tasks", task, "Origin", b.url).ok(t, http.StatusCreated, nil)
		b.call(t, "GET", "/v1/tasks/1", "", "Sec-Fetch-Site", "cross-site").ok(t, http.StatusOK, nil)
	})
}
