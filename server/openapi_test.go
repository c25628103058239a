package server

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
)

// openapiDoc is the embedded document, decoded.
func openapiDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v, want 3.1.0", doc["openapi"])
	}
	return doc
}

// operations returns the document's operations as "METHOD /path" with
// their path item.
func operations(doc map[string]any) map[string][2]map[string]any {
	ops := map[string][2]map[string]any{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			ops[strings.ToUpper(method)+" "+path] = [2]map[string]any{op.(map[string]any), item.(map[string]any)}
		}
	}
	return ops
}

// resolve follows a local $ref.
func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	var cur any = doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		next, ok := cur.(map[string]any)[part]
		if !ok {
			t.Fatalf("$ref %s does not resolve", ref)
		}
		cur = next
	}
	return cur.(map[string]any)
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := openapiDoc(t)
	ops := operations(doc)
	served := servedRoutes()
	for _, pattern := range served {
		if _, ok := ops[pattern]; !ok {
			t.Errorf("route %s is served but not in openapi.json", pattern)
		}
	}
	drv, err := sqlite.Open(t.Context(), t.TempDir()+"/keel.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	c, err := keel.NewClient(keel.Config{Driver: drv})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for pattern, op := range ops {
		if !slices.Contains(served, pattern) {
			t.Errorf("openapi.json documents %s, which is not served", pattern)
		}
		// The mux routes the documented operation to that very pattern.
		method, path, _ := concrete(pattern)
		if _, got := s.mux.Handler(httptest.NewRequest(method, path, nil)); got != pattern {
			t.Errorf("%s: the mux routes %s %s to %q", pattern, method, path, got)
		}
		checkOperation(t, doc, pattern, op[0], op[1])
	}
}

// checkOperation checks one operation's roles, security, parameters and
// error responses.
func checkOperation(t *testing.T, doc map[string]any, pattern string, op, item map[string]any) {
	t.Helper()
	var roles []Role
	for _, r := range op["x-keel-roles"].([]any) {
		roles = append(roles, Role(r.(string)))
	}
	want := slices.Clone(roleRules[pattern])
	slices.Sort(want)
	slices.Sort(roles)
	if !slices.Equal(roles, want) {
		t.Errorf("%s: x-keel-roles %v, want %v", pattern, roles, want)
	}
	security, overrides := op["security"]
	responses := op["responses"].(map[string]any)
	if want == nil {
		if !overrides || len(security.([]any)) != 0 {
			t.Errorf("%s is public but its security is %v", pattern, security)
		}
	} else {
		if overrides {
			t.Errorf("%s overrides the global bearer security", pattern)
		}
		for _, status := range []string{"401", "403", "500"} {
			if _, ok := responses[status]; !ok {
				t.Errorf("%s: no %s response", pattern, status)
			}
		}
	}
	if _, ok := op["requestBody"]; ok {
		for _, status := range []string{"400", "413", "415"} {
			if _, ok := responses[status]; !ok {
				t.Errorf("%s takes a body but documents no %s", pattern, status)
			}
		}
	}
	for status, r := range responses {
		content := resolve(t, doc, r)["content"].(map[string]any)
		if status >= "400" && content["application/problem+json"] == nil {
			t.Errorf("%s: response %s is not application/problem+json", pattern, status)
		}
		if status < "400" && content["application/json"] == nil && pattern != metricsRoute { // metrics are text/plain
			t.Errorf("%s: response %s is not application/json", pattern, status)
		}
	}
	// Every {param} of the path is declared, and nothing else in the path.
	declared := map[string]bool{}
	for _, list := range []any{item["parameters"], op["parameters"]} {
		ps, _ := list.([]any)
		for _, p := range ps {
			p := resolve(t, doc, p)
			if p["in"] == "path" {
				declared[p["name"].(string)] = true
			}
		}
	}
	_, path, _ := strings.Cut(pattern, " ")
	inPath := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(path, -1) {
		inPath[m[1]] = true
	}
	if !reflect.DeepEqual(declared, inPath) {
		t.Errorf("%s: path parameters declared %v, in the path %v", pattern, declared, inPath)
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	doc := openapiDoc(t)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["$ref"]; ok {
				resolve(t, doc, x)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	scheme := doc["components"].(map[string]any)["securitySchemes"].(map[string]any)["bearer"].(map[string]any)
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Fatalf("bearer scheme %v", scheme)
	}
	global := doc["security"].([]any)
	if len(global) != 1 || global[0].(map[string]any)["bearer"] == nil {
		t.Fatalf("global security %v", global)
	}
}

// TestOpenAPISchemasMatchTypes checks that each schema has exactly the
// JSON fields of its wire type and, for answers, requires exactly the
// fields that are always present.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	doc := openapiDoc(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	requests := map[string]bool{"EnqueueRequest": true, "BatchRequest": true, "BulkRequest": true, "QueuePatch": true, "TypePatch": true,
		"AlertRulesPatch": true, "DrillRequest": true, "StepRequest": true, "RampRequest": true, "BrakeSettings": true,
		"ResubmitRequest": true, "BatchCreateRequest": true, "BatchAddRequest": true,
		"WorkflowCreateRequest": true, "WorkflowTaskRequest": true}
	for name, typ := range map[string]reflect.Type{
		"EnqueueRequest": reflect.TypeFor[EnqueueRequest](), "BatchRequest": reflect.TypeFor[BatchRequest](),
		"AttemptError": reflect.TypeFor[AttemptError](), "Task": reflect.TypeFor[Task](),
		"Step": reflect.TypeFor[Step](), "StepRequest": reflect.TypeFor[StepRequest](),
		"BatchResponse": reflect.TypeFor[BatchResponse](), "TaskList": reflect.TypeFor[TaskList](),
		"BulkRequest": reflect.TypeFor[BulkRequest](), "BulkResponse": reflect.TypeFor[BulkResponse](),
		"Queue": reflect.TypeFor[Queue](), "QueueList": reflect.TypeFor[QueueList](), "QueuePatch": reflect.TypeFor[QueuePatch](),
		"TaskType": reflect.TypeFor[TaskType](), "TypeList": reflect.TypeFor[TypeList](),
		"Brake": reflect.TypeFor[Brake](), "BrakeList": reflect.TypeFor[BrakeList](), "BrakeSettings": reflect.TypeFor[BrakeSettings](), "TypePatch": reflect.TypeFor[TypePatch](),
		"QueueStats": reflect.TypeFor[QueueStats](), "Stats": reflect.TypeFor[Stats](), "KeelStats": reflect.TypeFor[KeelStats](),
		"Node": reflect.TypeFor[Node](), "NodeList": reflect.TypeFor[NodeList](),
		"Pool": reflect.TypeFor[Pool](), "System": reflect.TypeFor[System](), "ChaosRun": reflect.TypeFor[ChaosRun](),
		"Health": reflect.TypeFor[Health](), "Problem": reflect.TypeFor[Problem](),
		"Alert": reflect.TypeFor[AlertRecord](), "AlertDelivery": reflect.TypeFor[AlertDeliveryRec](), "AlertList": reflect.TypeFor[AlertList](),
		"AlertRules": reflect.TypeFor[AlertRules](), "AlertRulesPatch": reflect.TypeFor[AlertRulesPatch](),
		"RampRequest": reflect.TypeFor[RampRequest](), "RampInfo": reflect.TypeFor[RampInfo](),
		"DrillRequest": reflect.TypeFor[DrillRequest](), "DrillResult": reflect.TypeFor[DrillResult](), "DrillNotifier": reflect.TypeFor[DrillNotifier](),
		"Schedule": reflect.TypeFor[ScheduleRecord](), "ScheduleList": reflect.TypeFor[ScheduleList](),
		"Source": reflect.TypeFor[SourceRecord](), "SourceList": reflect.TypeFor[SourceList](),
		"RejectedMessage": reflect.TypeFor[RejectedRecord](), "RejectedList": reflect.TypeFor[RejectedList](),
		"ResubmitRequest":    reflect.TypeFor[ResubmitRequest](),
		"BatchCreateRequest": reflect.TypeFor[BatchCreateRequest](), "BatchAddRequest": reflect.TypeFor[BatchAddRequest](),
		"Batch": reflect.TypeFor[BatchRecord](), "BatchTasks": reflect.TypeFor[BatchTasks](), "BatchList": reflect.TypeFor[BatchList](),
		"BatchMembers":          reflect.TypeFor[BatchMembers](),
		"WorkflowCreateRequest": reflect.TypeFor[WorkflowCreateRequest](), "WorkflowTaskRequest": reflect.TypeFor[WorkflowTaskRequest](),
		"WorkflowNode": reflect.TypeFor[WorkflowNode](), "Workflow": reflect.TypeFor[WorkflowRecord](),
		"WorkflowList": reflect.TypeFor[WorkflowList](),
	} {
		schema, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		var fields, always []string
		for i := range typ.NumField() {
			tag := typ.Field(i).Tag.Get("json")
			field, opts, _ := strings.Cut(tag, ",")
			fields = append(fields, field)
			if !strings.Contains(opts, "omitempty") {
				always = append(always, field)
			}
		}
		var props, required []string
		for p := range schema["properties"].(map[string]any) {
			props = append(props, p)
		}
		for _, r := range asSlice(schema["required"]) {
			required = append(required, r.(string))
		}
		slices.Sort(fields)
		slices.Sort(always)
		slices.Sort(props)
		slices.Sort(required)
		if !slices.Equal(fields, props) {
			t.Errorf("schema %s has properties %v; %s has JSON fields %v", name, props, typ, fields)
		}
		if requests[name] {
			if schema["additionalProperties"] != false {
				t.Errorf("request schema %s allows additional properties; the server rejects them", name)
			}
		} else if !slices.Equal(always, required) {
			t.Errorf("schema %s requires %v; %s always has %v", name, required, typ, always)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
