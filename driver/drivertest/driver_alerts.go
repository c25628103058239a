package drivertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Alerts (FireAlert, ResolveAlert, GetAlert, ListAlerts, RecordDelivery)
// and stored documents (GetMeta, PutMeta). Every time the driver stores is
// the params' own, kept to the microsecond.

func (e *env) fireAlert(p driver.FireAlertParams) (*driver.AlertRow, bool) {
	e.t.Helper()
	a, opened, err := e.drv.FireAlert(e.ctx, p)
	if err != nil {
		e.t.Fatalf("fire alert %s %s: %v", p.Rule, p.Subject, err)
	}
	return a, opened
}

func (e *env) resolveAlert(p driver.ResolveAlertParams) (*driver.AlertRow, bool) {
	e.t.Helper()
	a, resolved, err := e.drv.ResolveAlert(e.ctx, p)
	if err != nil {
		e.t.Fatalf("resolve alert %d: %v", p.ID, err)
	}
	return a, resolved
}

func (e *env) getAlert(id int64) *driver.AlertRow {
	e.t.Helper()
	a, err := e.drv.GetAlert(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get alert %d: %v", id, err)
	}
	return a
}

func (e *env) listAlerts(f driver.AlertFilter) []driver.AlertRow {
	e.t.Helper()
	as, err := e.drv.ListAlerts(e.ctx, f)
	if err != nil {
		e.t.Fatalf("list alerts %+v: %v", f, err)
	}
	return as
}

func (e *env) recordDelivery(p driver.DeliveryParams) {
	e.t.Helper()
	if err := e.drv.RecordDelivery(e.ctx, p); err != nil {
		e.t.Fatalf("record delivery %+v: %v", p, err)
	}
}

func alertIDs(as []driver.AlertRow) []int64 {
	out := []int64{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

// sameJSON reports whether values came back as they were stored: the
// same text, nil for nil.
func sameJSON(got, want json.RawMessage) bool {
	return bytes.Equal(got, want) && (got == nil) == (want == nil)
}

// checkFired fails unless a is the open alert p fired (at p.Now to the
// microsecond).
func checkFired(t *testing.T, a *driver.AlertRow, p driver.FireAlertParams) {
	t.Helper()
	if a.ID <= 0 || a.Rule != p.Rule || a.Subject != p.Subject || a.Message != p.Message || a.Hint != p.Hint ||
		!sameJSON(a.Values, p.Values) ||
		!a.FiredAt.Equal(p.Now.Truncate(time.Microsecond)) || !a.Open() || a.ResolvedMessage != "" || a.ResolvedValues != nil {
		t.Fatalf("fired alert\n got %+v\nwant open %+v", a, p)
	}
}

func testAlertLifecycle(t *testing.T, e *env) {
	t0 := e.clock.Now().Add(1234567 * time.Nanosecond) // kept to the microsecond
	fire := driver.FireAlertParams{Rule: "dead_per_hour", Subject: "type:email.send", Message: "4 dead tasks in the last hour",
		Hint: "keel dlq list --type email.send", Values: json.RawMessage(`{"dead": 4, "threshold": 3}`), Now: t0}
	a, opened := e.fireAlert(fire)
	if !opened {
		t.Fatal("first fire: not opened")
	}
	checkFired(t, a, fire)
	if len(a.Deliveries) != 0 {
		t.Fatalf("new alert has deliveries %+v", a.Deliveries)
	}
	if got := e.getAlert(a.ID); got.ID != a.ID {
		t.Fatalf("get alert %d returned %d", a.ID, got.ID)
	} else {
		checkFired(t, got, fire)
	}

	// Firing again while it is open returns the open one, unchanged.
	again := fire
	again.Message, again.Values, again.Now = "5 dead tasks in the last hour", json.RawMessage(`{"dead": 5}`), t0.Add(time.Minute)
	b, opened := e.fireAlert(again)
	if opened || b.ID != a.ID {
		t.Fatalf("fire while open: id %d opened %v, want %d and false", b.ID, opened, a.ID)
	}
	checkFired(t, b, fire)

	// Another subject of the same rule is another alert; no values is nil.
	other := driver.FireAlertParams{Rule: "dead_per_hour", Subject: "type:report", Message: "9 dead", Now: t0}
	c, opened := e.fireAlert(other)
	if !opened || c.ID == a.ID {
		t.Fatalf("other subject: id %d opened %v, want a new alert", c.ID, opened)
	}
	checkFired(t, c, other)

	// Resolve: the time, message and values are kept; the second is a no-op.
	t1 := t0.Add(10*time.Minute + 999*time.Nanosecond)
	resolve := driver.ResolveAlertParams{ID: a.ID, Message: "0 dead tasks in the last hour", Values: json.RawMessage(`{"dead":0}`), Now: t1}
	r, resolved := e.resolveAlert(resolve)
	if !resolved || r.ID != a.ID || r.Open() || !r.ResolvedAt.Equal(t1.Truncate(time.Microsecond)) ||
		r.ResolvedMessage != resolve.Message || !sameJSON(r.ResolvedValues, resolve.Values) ||
		r.Message != fire.Message || !r.FiredAt.Equal(a.FiredAt) {
		t.Fatalf("resolve: %v %+v", resolved, r)
	}
	r2, resolved := e.resolveAlert(driver.ResolveAlertParams{ID: a.ID, Message: "again", Now: t1.Add(time.Hour)})
	if resolved || !r2.ResolvedAt.Equal(r.ResolvedAt) || r2.ResolvedMessage != resolve.Message || !sameJSON(r2.ResolvedValues, resolve.Values) {
		t.Fatalf("second resolve changed the alert: %v %+v", resolved, r2)
	}
	if got := e.getAlert(a.ID); got.Open() || !got.ResolvedAt.Equal(r.ResolvedAt) {
		t.Fatalf("get resolved alert: %+v", got)
	}
	if got := e.getAlert(c.ID); !got.Open() {
		t.Fatalf("resolving one subject resolved another: %+v", got)
	}

	// Firing after the resolve opens a new alert.
	again.Now = t1.Add(time.Minute)
	d, opened := e.fireAlert(again)
	if !opened || d.ID == a.ID || d.ID == c.ID {
		t.Fatalf("fire after resolve: id %d opened %v, want a new alert", d.ID, opened)
	}
	checkFired(t, d, again)

	// Unknown ids.
	if _, err := e.drv.GetAlert(e.ctx, d.ID+100); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get unknown alert: %v, want ErrNotFound", err)
	}
	if _, _, err := e.drv.ResolveAlert(e.ctx, driver.ResolveAlertParams{ID: d.ID + 100, Message: "x", Now: t1}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("resolve unknown alert: %v, want ErrNotFound", err)
	}
}

// testAlertUpdate: an open alert keeps the numbers it fired with and
// records the latest ones beside them; a resolved or unknown alert is not
// updated.
func testAlertUpdate(t *testing.T, e *env) {
	t0 := e.clock.Now().Add(1234567 * time.Nanosecond)
	fire := driver.FireAlertParams{Rule: "dead_per_hour", Subject: "all", Message: "6 tasks were dead-lettered",
		Values: json.RawMessage(`{"dead": 6}`), Now: t0}
	a, _ := e.fireAlert(fire)
	if a.CurrentMessage != "" || a.CurrentValues != nil || !a.CurrentAt.IsZero() {
		t.Fatalf("a new alert has current numbers: %+v", a)
	}
	for i, n := range []int{12, 49} {
		up := driver.UpdateAlertParams{ID: a.ID, Message: fmt.Sprintf("%d tasks were dead-lettered", n),
			Values: json.RawMessage(fmt.Sprintf(`{"dead": %d}`, n)), Now: t0.Add(time.Duration(i+1)*time.Minute + 999*time.Nanosecond)}
		ok, err := e.drv.UpdateAlert(e.ctx, up)
		if err != nil || !ok {
			t.Fatalf("update open alert: %v %v", ok, err)
		}
		for _, got := range []*driver.AlertRow{e.getAlert(a.ID), &e.listAlerts(driver.AlertFilter{Open: true, Limit: 10})[0]} {
			checkFired(t, got, fire)
			if got.CurrentMessage != up.Message || !sameJSON(got.CurrentValues, up.Values) || !got.CurrentAt.Equal(up.Now.Truncate(time.Microsecond)) {
				t.Fatalf("after update %d: current %q %s %v, want %q %s %v", i, got.CurrentMessage, got.CurrentValues, got.CurrentAt,
					up.Message, up.Values, up.Now.Truncate(time.Microsecond))
			}
		}
	}
	// Firing again while open returns it with its current numbers.
	if b, opened := e.fireAlert(fire); opened || b.CurrentMessage != "49 tasks were dead-lettered" {
		t.Fatalf("fire while open: opened %v, %+v", opened, b)
	}
	e.resolveAlert(driver.ResolveAlertParams{ID: a.ID, Message: "back to 3 or fewer", Now: t0.Add(time.Hour)})
	ok, err := e.drv.UpdateAlert(e.ctx, driver.UpdateAlertParams{ID: a.ID, Message: "late", Now: t0.Add(2 * time.Hour)})
	if err != nil || ok {
		t.Fatalf("update of a resolved alert: %v %v, want false", ok, err)
	}
	if got := e.getAlert(a.ID); got.CurrentMessage != "49 tasks were dead-lettered" {
		t.Fatalf("a resolved alert was updated: %+v", got)
	}
	if ok, err := e.drv.UpdateAlert(e.ctx, driver.UpdateAlertParams{ID: a.ID + 100, Message: "x", Now: t0}); err != nil || ok {
		t.Fatalf("update of an unknown alert: %v %v, want false", ok, err)
	}
	for name, p := range map[string]driver.UpdateAlertParams{
		"id 0":            {ID: 0, Message: "m", Now: t0},
		"empty message":   {ID: a.ID, Now: t0},
		"long message":    {ID: a.ID, Message: strings.Repeat("x", driver.MaxAlertText+1), Now: t0},
		"values an array": {ID: a.ID, Message: "m", Values: json.RawMessage(`[1]`), Now: t0},
	} {
		if _, err := e.drv.UpdateAlert(e.ctx, p); err == nil {
			t.Errorf("update with %s: no error", name)
		}
	}
}

// testAlertFireConcurrent: leaders racing to fire one alert open it once.
func testAlertFireConcurrent(t *testing.T, e *env) {
	for round := range 3 {
		now := e.clock.Advance(time.Minute)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			opened int
			ids    = map[int64]bool{}
		)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, ok, err := e.drv.FireAlert(e.ctx, driver.FireAlertParams{Rule: "oldest_ready_age", Subject: "queue:default",
					Message: "fired by " + strings.Repeat("x", i), Now: now})
				if err != nil {
					t.Errorf("fire %d: %v", i, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				ids[a.ID] = true
				if ok {
					opened++
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if opened != 1 || len(ids) != 1 {
			t.Fatalf("round %d: opened %d times, ids %v; want one alert opened once", round, opened, ids)
		}
		for id := range ids {
			e.resolveAlert(driver.ResolveAlertParams{ID: id, Message: "cleared", Now: now})
		}
	}
	if got := e.listAlerts(driver.AlertFilter{Limit: 10}); len(got) != 3 {
		t.Fatalf("alerts %v, want 3 (one per round)", alertIDs(got))
	}
}

func testAlertList(t *testing.T, e *env) {
	t0 := e.clock.Now()
	fire := func(rule, subject string, at time.Time) int64 {
		a, _ := e.fireAlert(driver.FireAlertParams{Rule: rule, Subject: subject, Message: "m", Now: at})
		return a.ID
	}
	a1 := fire("r1", "s1", t0)
	a2 := fire("r1", "s2", t0.Add(time.Minute))
	a3 := fire("r2", "s1", t0.Add(2*time.Minute))
	e.resolveAlert(driver.ResolveAlertParams{ID: a1, Message: "ok", Now: t0.Add(3 * time.Minute)})
	a4 := fire("r1", "s1", t0.Add(4*time.Minute))
	a5 := fire("r1", "s1 ", t0.Add(5*time.Minute)) // a trailing space is another subject

	for _, c := range []struct {
		name string
		f    driver.AlertFilter
		want []int64
	}{
		{"all", driver.AlertFilter{Limit: 100}, []int64{a5, a4, a3, a2, a1}},
		{"limit", driver.AlertFilter{Limit: 2}, []int64{a5, a4}},
		{"page", driver.AlertFilter{BeforeID: a4, Limit: 2}, []int64{a3, a2}},
		{"last page", driver.AlertFilter{BeforeID: a2, Limit: 2}, []int64{a1}},
		{"rule", driver.AlertFilter{Rule: "r1", Limit: 100}, []int64{a5, a4, a2, a1}},
		{"subject", driver.AlertFilter{Subject: "s1", Limit: 100}, []int64{a4, a3, a1}},
		{"rule and subject", driver.AlertFilter{Rule: "r1", Subject: "s1", Limit: 100}, []int64{a4, a1}},
		{"open", driver.AlertFilter{Open: true, Limit: 100}, []int64{a5, a4, a3, a2}},
		{"open rule and subject", driver.AlertFilter{Rule: "r1", Subject: "s1", Open: true, Limit: 100}, []int64{a4}},
		{"since", driver.AlertFilter{Since: t0.Add(2 * time.Minute), Limit: 100}, []int64{a5, a4, a3}},
		{"since, paged", driver.AlertFilter{Since: t0.Add(time.Minute), BeforeID: a4, Limit: 100}, []int64{a3, a2}},
		{"none", driver.AlertFilter{Rule: "r3", Limit: 100}, []int64{}},
	} {
		if got := alertIDs(e.listAlerts(c.f)); !slices.Equal(got, c.want) {
			t.Errorf("%s: ids %v, want %v", c.name, got, c.want)
		}
	}
	if !(a1 < a2 && a2 < a3 && a3 < a4 && a4 < a5) {
		t.Fatalf("ids not increasing: %d %d %d %d %d", a1, a2, a3, a4, a5)
	}
}

func testAlertDeliveries(t *testing.T, e *env) {
	t0 := e.clock.Now()
	a, _ := e.fireAlert(driver.FireAlertParams{Rule: "r", Subject: "all", Message: "m", Now: t0})
	b, _ := e.fireAlert(driver.FireAlertParams{Rule: "r", Subject: "other", Message: "m", Now: t0})
	at := func(d time.Duration) time.Time { return t0.Add(d + 789*time.Nanosecond) }
	e.recordDelivery(driver.DeliveryParams{AlertID: a.ID, Event: driver.AlertFired, Notifier: "webhook", Error: "503 Service Unavailable", Now: at(time.Second)})
	e.recordDelivery(driver.DeliveryParams{AlertID: a.ID, Event: driver.AlertFired, Notifier: "webhook", Delivered: true, Now: at(2 * time.Second)})
	e.recordDelivery(driver.DeliveryParams{AlertID: a.ID, Event: driver.AlertFired, Notifier: "webhook", Error: "resent: timeout", Now: at(3 * time.Second)})
	e.recordDelivery(driver.DeliveryParams{AlertID: a.ID, Event: driver.AlertResolved, Notifier: "email", Error: "refused", Now: at(4 * time.Second)})
	e.recordDelivery(driver.DeliveryParams{AlertID: a.ID, Event: driver.AlertFired, Notifier: "email", Delivered: true, Now: at(5 * time.Second)})
	e.recordDelivery(driver.DeliveryParams{AlertID: b.ID, Event: driver.AlertFired, Notifier: "slack", Delivered: true, Now: at(6 * time.Second)})

	us := func(d time.Duration) time.Time { return at(d).Truncate(time.Microsecond) }
	want := []driver.DeliveryRow{
		{AlertID: a.ID, Event: driver.AlertFired, Notifier: "email", Attempts: 1, DeliveredAt: us(5 * time.Second), UpdatedAt: us(5 * time.Second)},
		{AlertID: a.ID, Event: driver.AlertFired, Notifier: "webhook", Attempts: 3, DeliveredAt: us(2 * time.Second), LastError: "resent: timeout", UpdatedAt: us(3 * time.Second)},
		{AlertID: a.ID, Event: driver.AlertResolved, Notifier: "email", Attempts: 1, LastError: "refused", UpdatedAt: us(4 * time.Second)},
	}
	checkDeliveries := func(where string, got []driver.DeliveryRow, want []driver.DeliveryRow) {
		t.Helper()
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			g, w := got[i], want[i]
			ok = g.AlertID == w.AlertID && g.Event == w.Event && g.Notifier == w.Notifier && g.Attempts == w.Attempts &&
				g.DeliveredAt.Equal(w.DeliveredAt) && g.LastError == w.LastError && g.UpdatedAt.Equal(w.UpdatedAt)
		}
		if !ok {
			t.Fatalf("%s: deliveries\n got %+v\nwant %+v", where, got, want)
		}
	}
	checkDeliveries("get", e.getAlert(a.ID).Deliveries, want)
	list := e.listAlerts(driver.AlertFilter{Limit: 10})
	if len(list) != 2 || list[0].ID != b.ID || list[1].ID != a.ID {
		t.Fatalf("list: ids %v, want [%d %d]", alertIDs(list), b.ID, a.ID)
	}
	checkDeliveries("list", list[1].Deliveries, want)
	checkDeliveries("list, other alert", list[0].Deliveries, []driver.DeliveryRow{
		{AlertID: b.ID, Event: driver.AlertFired, Notifier: "slack", Attempts: 1, DeliveredAt: us(6 * time.Second), UpdatedAt: us(6 * time.Second)},
	})
	// A fire of the open alert and its resolve return the deliveries too.
	if again, _ := e.fireAlert(driver.FireAlertParams{Rule: "r", Subject: "all", Message: "m", Now: t0}); again.ID == a.ID {
		checkDeliveries("fire again", again.Deliveries, want)
	} else {
		t.Fatalf("fire again opened %d", again.ID)
	}
	r, _ := e.resolveAlert(driver.ResolveAlertParams{ID: a.ID, Message: "ok", Now: at(time.Minute)})
	checkDeliveries("resolve", r.Deliveries, want)

	err := e.drv.RecordDelivery(e.ctx, driver.DeliveryParams{AlertID: b.ID + 100, Event: driver.AlertFired, Notifier: "webhook", Now: t0})
	if !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("delivery of an unknown alert: %v, want ErrNotFound", err)
	}
}

func testMeta(t *testing.T, e *env) {
	now := e.clock.Now()
	get := func(name string) []byte {
		t.Helper()
		v, err := e.drv.GetMeta(e.ctx, name)
		if err != nil {
			t.Fatalf("get meta %s: %v", name, err)
		}
		return v
	}
	put := func(name string, v []byte) {
		t.Helper()
		if err := e.drv.PutMeta(e.ctx, name, v, now); err != nil {
			t.Fatalf("put meta %s: %v", name, err)
		}
	}
	if v := get("alerts.state"); v != nil {
		t.Fatalf("missing document: %q, want nil", v)
	}
	big := bytes.Repeat([]byte{0, 1, 2, 0xff, 'x'}, driver.MaxMetaValue/5)
	big = append(big, make([]byte, driver.MaxMetaValue-len(big))...) // exactly the limit, not UTF-8
	put("alerts.state", []byte(`{"v":1}`))
	put("big", big)
	put("empty", []byte{})
	if v := get("alerts.state"); string(v) != `{"v":1}` {
		t.Fatalf("get: %q", v)
	}
	if v := get("big"); !bytes.Equal(v, big) {
		t.Fatalf("get big: %d bytes, want %d", len(v), len(big))
	}
	if v := get("empty"); v == nil || len(v) != 0 {
		t.Fatalf("get empty: %#v, want an empty, non-nil value", v)
	}
	put("alerts.state", []byte(`{"v":2}`))
	if v := get("alerts.state"); string(v) != `{"v":2}` {
		t.Fatalf("get after replace: %q", v)
	}
	put("alerts.state", nil)
	if v := get("alerts.state"); v != nil {
		t.Fatalf("get after delete: %q, want nil", v)
	}
	put("alerts.state", nil) // deleting nothing is no error
	if v := get("big"); !bytes.Equal(v, big) {
		t.Fatal("deleting one document changed another")
	}
}

// testAlertBadInput: what Validate refuses reaches no table.
func testAlertBadInput(t *testing.T, e *env) {
	now := e.clock.Now()
	ok := driver.FireAlertParams{Rule: "r", Subject: "s", Message: "m", Now: now}
	long := strings.Repeat("x", 5000)
	for name, mod := range map[string]func(p *driver.FireAlertParams){
		"empty rule":       func(p *driver.FireAlertParams) { p.Rule = "" },
		"long rule":        func(p *driver.FireAlertParams) { p.Rule = long[:driver.MaxAlertRule+1] },
		"empty subject":    func(p *driver.FireAlertParams) { p.Subject = "" },
		"long subject":     func(p *driver.FireAlertParams) { p.Subject = long[:driver.MaxAlertSubject+1] },
		"empty message":    func(p *driver.FireAlertParams) { p.Message = "" },
		"long message":     func(p *driver.FireAlertParams) { p.Message = long },
		"long hint":        func(p *driver.FireAlertParams) { p.Hint = long },
		"values not JSON":  func(p *driver.FireAlertParams) { p.Values = json.RawMessage(`{"a":`) },
		"values an array":  func(p *driver.FireAlertParams) { p.Values = json.RawMessage(`[1]`) },
		"values too long":  func(p *driver.FireAlertParams) { p.Values = json.RawMessage(`{"a":"` + long + `"}`) },
		"values empty raw": func(p *driver.FireAlertParams) { p.Values = json.RawMessage{} },
	} {
		p := ok
		mod(&p)
		if _, _, err := e.drv.FireAlert(e.ctx, p); err == nil {
			t.Errorf("fire with %s: no error", name)
		}
	}
	if got := e.listAlerts(driver.AlertFilter{Limit: 100}); len(got) != 0 {
		t.Fatalf("refused fires wrote alerts %v", alertIDs(got))
	}

	a, _ := e.fireAlert(ok)
	for name, p := range map[string]driver.ResolveAlertParams{
		"id 0":            {ID: 0, Message: "m", Now: now},
		"negative id":     {ID: -1, Message: "m", Now: now},
		"empty message":   {ID: a.ID, Now: now},
		"long message":    {ID: a.ID, Message: long, Now: now},
		"values a string": {ID: a.ID, Message: "m", Values: json.RawMessage(`"x"`), Now: now},
	} {
		if _, _, err := e.drv.ResolveAlert(e.ctx, p); err == nil {
			t.Errorf("resolve with %s: no error", name)
		}
	}
	for name, p := range map[string]driver.DeliveryParams{
		"alert 0":        {Event: driver.AlertFired, Notifier: "n", Now: now},
		"event x":        {AlertID: a.ID, Event: "x", Notifier: "n", Now: now},
		"empty event":    {AlertID: a.ID, Notifier: "n", Now: now},
		"empty notifier": {AlertID: a.ID, Event: driver.AlertFired, Now: now},
		"long notifier":  {AlertID: a.ID, Event: driver.AlertFired, Notifier: long[:driver.MaxAlertNotifier+1], Now: now},
		"long error":     {AlertID: a.ID, Event: driver.AlertFired, Notifier: "n", Error: long, Now: now},
	} {
		if err := e.drv.RecordDelivery(e.ctx, p); err == nil || errors.Is(err, driver.ErrNotFound) {
			t.Errorf("delivery with %s: %v, want a validation error", name, err)
		}
	}
	got := e.getAlert(a.ID)
	if !got.Open() || got.ResolvedMessage != "" || len(got.Deliveries) != 0 {
		t.Fatalf("refused calls changed the alert: %+v", got)
	}
	for name, f := range map[string]driver.AlertFilter{
		"limit 0":        {},
		"limit 1001":     {Limit: 1001},
		"negative limit": {Limit: -1},
		"negative page":  {BeforeID: -1, Limit: 10},
	} {
		if _, err := e.drv.ListAlerts(e.ctx, f); err == nil {
			t.Errorf("list with %s: no error", name)
		}
	}

	for name, c := range map[string]struct {
		name  string
		value []byte
	}{
		"empty name":   {"", []byte("v")},
		"long name":    {long[:driver.MaxMetaName+1], []byte("v")},
		"value 64 KiB": {"doc", make([]byte, driver.MaxMetaValue+1)},
		"delete empty": {"", nil},
	} {
		if err := e.drv.PutMeta(e.ctx, c.name, c.value, now); err == nil {
			t.Errorf("put meta with %s: no error", name)
		}
	}
	if v, err := e.drv.GetMeta(e.ctx, "doc"); err != nil || v != nil {
		t.Fatalf("refused put wrote a document: %q, %v", v, err)
	}
}
