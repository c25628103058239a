package known

import (
	"reflect"
	"testing"
)

func TestOf(t *testing.T) {
	q := func(s string) *string { return &s }
	got := Of(Client{
		Queues: []string{"mail", "default"},
		Keel:   []string{"keel.drill"},
		Types: []Declared{
			{Name: "send", Queue: q("mail")},
			{Name: "resize", Handled: true},
			{Name: "report", Queue: q("reports")},
			{Name: "remote"}, // declared only: another process decides its queue
			{Name: "odd", Queue: q("keel")},
		},
		Schedules: []string{"nightly", "hourly"},
		Reserved:  "keel",
		Default:   "default",
	})
	want := Work{
		Queues: []string{"default", "mail", "reports"},
		Types: []Type{{"keel.drill", "keel"}, {"odd", "keel"}, {"remote", ""}, {"report", "reports"},
			{"resize", "default"}, {"send", "mail"}},
		Schedules: []string{"hourly", "nightly"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Of:\n got %+v\nwant %+v", got, want)
	}
	if w := Of(Client{Reserved: "keel", Default: "default"}); w.Queues != nil || w.Types != nil || w.Schedules != nil {
		t.Fatalf("empty client: %#v", w)
	}
}
