package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestBrakes: GET /v1/brakes lists stored brakes, GET /v1/types shows a
// type's brake, and POST /v1/types/{name}/brake/close closes an open one
// (409 when it is not open, 400 for a bad name).
func TestBrakes(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		var l BrakeList
		b.call(t, "GET", "/v1/brakes", "").ok(t, http.StatusOK, &l)
		if len(l.Brakes) != 0 {
			t.Fatalf("brakes %+v", l.Brakes)
		}
		b.call(t, "POST", "/v1/types/report.build/brake/close", "").problem(t, http.StatusConflict, "is not open")
		b.call(t, "POST", "/v1/types/a%20b/brake/close", "").problem(t, http.StatusBadRequest, "invalid task type")
		// The leader opens brakes; here the test writes one.
		now := time.Now().UTC().Truncate(time.Millisecond)
		braker := b.drv.(driver.Braker)
		if ok, err := braker.ChangeBrake(t.Context(), driver.BrakeChange{To: driver.BrakeRow{Type: typeReport, State: driver.BrakeOpen,
			OpenedAt: now, Until: now.Add(time.Minute), Ratio: 0.8, Attempts: 20, Reason: "16 of the last 20 attempts failed"},
			From: []driver.BrakeState{driver.BrakeClosed}, Now: now}); err != nil || !ok {
			t.Fatalf("open: %v %v", ok, err)
		}
		b.call(t, "GET", "/v1/brakes", "").ok(t, http.StatusOK, &l)
		if len(l.Brakes) != 1 || l.Brakes[0].Type != typeReport || l.Brakes[0].State != "open" || l.Brakes[0].Until == nil ||
			l.Brakes[0].Ratio != 0.8 || l.Brakes[0].Attempts != 20 {
			t.Fatalf("brakes %+v", l.Brakes)
		}
		var tl TypeList
		b.call(t, "GET", "/v1/types", "").ok(t, http.StatusOK, &tl)
		for _, ty := range tl.Types {
			want := "closed"
			if ty.Name == typeReport {
				want = "open"
			}
			if ty.Brake.State != want {
				t.Fatalf("type %s: brake %+v, want %s", ty.Name, ty.Brake, want)
			}
		}
		var closed Brake
		b.call(t, "POST", "/v1/types/report.build/brake/close", "").ok(t, http.StatusOK, &closed)
		if closed.State != "closed" || closed.ClosedAt == nil || closed.Reason != "closed by hand" {
			t.Fatalf("closed %+v", closed)
		}
		b.call(t, "POST", "/v1/types/report.build/brake/close", "").problem(t, http.StatusConflict, "is not open")

		// Runtime thresholds: set, shown, cleared; bad ones write nothing.
		var set Brake
		b.call(t, "PUT", "/v1/types/mail.send/brake", `{"window":10,"threshold":0.8,"cooldown":"1m"}`).ok(t, http.StatusOK, &set)
		if set.Type != "mail.send" || set.State != "closed" || set.Settings.Window != 10 || set.Settings.Threshold != 0.8 ||
			set.Settings.Cooldown == nil || time.Duration(*set.Settings.Cooldown) != time.Minute {
			t.Fatalf("set brake %+v", set)
		}
		for body, want := range map[string]string{
			`{"window":-2}`:      "brake window must be in 1..10000",
			`{"threshold":1.5}`:  "brake threshold must be in (0, 1]",
			`{"cooldown":"25h"}`: "brake cooldown must be in 0..24h",
			// Stored in ms: 1ns is refused, not kept as 1ms.
			`{"cooldown":"1ns"}`:    `brake cooldown must be a whole number of milliseconds (settings are stored in ms), got "1ns"`,
			`{"cooldown":"1500us"}`: `brake cooldown must be a whole number of milliseconds`,
			`{"windows":3}`:         `unknown field "windows"`,
			`{"cooldown":"soon"}`:   "",
		} {
			b.call(t, "PUT", "/v1/types/other.type/brake", body).problem(t, http.StatusBadRequest, want)
		}
		b.call(t, "PUT", "/v1/types/keel.notify.log/brake", `{"window":3}`).problem(t, http.StatusBadRequest, "never brake")
		b.call(t, "GET", "/v1/brakes", "").ok(t, http.StatusOK, &l)
		if len(l.Brakes) != 2 {
			t.Fatalf("bad settings wrote brakes: %+v", l.Brakes)
		}
		b.call(t, "PUT", "/v1/types/mail.send/brake", `{}`).ok(t, http.StatusOK, &set)
		if set.Settings != (BrakeSettings{}) {
			t.Fatalf("cleared settings %+v", set.Settings)
		}
	})
}
