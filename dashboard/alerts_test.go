package dashboard

import (
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestAlertsPageFiredAndCurrent: an alert whose numbers grew while it
// fires shows those it fired with and the current ones; one whose numbers
// did not change shows its message once; a resolved one shows the last
// numbers while it fired. On every database.
func TestAlertsPageFiredAndCurrent(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		ctx := t.Context()
		fired := time.Now().Add(-10 * time.Minute)
		grown, _, err := b.drv.FireAlert(ctx, driver.FireAlertParams{Rule: "dead_per_hour", Subject: "all",
			Message: "6 tasks were dead-lettered in the last hour", Values: json.RawMessage(`{"dead":6}`), Now: fired})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.drv.UpdateAlert(ctx, driver.UpdateAlertParams{ID: grown.ID, Message: "49 tasks were dead-lettered in the last hour",
			Values: json.RawMessage(`{"dead":49}`), Now: fired.Add(5 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		same, _, err := b.drv.FireAlert(ctx, driver.FireAlertParams{Rule: "no_live_worker", Subject: "queue:reports",
			Message: "queue reports has 2 ready tasks", Now: fired})
		if err != nil {
			t.Fatal(err)
		}
		row := func(id int64) string {
			t.Helper()
			r := b.do(t, "GET", "/alerts", readToken, nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET /alerts: %d %s", r.status, r.body)
			}
			m := regexp.MustCompile(`(?s)<tr id="alert-` + regexp.QuoteMeta(strconv.FormatInt(id, 10)) + `">(.*?)</tr>`).FindStringSubmatch(r.body)
			if m == nil {
				t.Fatalf("no row of alert %d:\n%s", id, r.body)
			}
			return html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], " "))
		}
		got := row(grown.ID)
		for _, want := range []string{"At firing: 6 tasks were dead-lettered in the last hour", "Now (", "): 49 tasks were dead-lettered in the last hour"} {
			if !strings.Contains(got, want) {
				t.Errorf("the grown alert's row lacks %q:\n%s", want, got)
			}
		}
		got = row(same.ID)
		if strings.Count(got, "queue reports has 2 ready tasks") != 1 || strings.Contains(got, "At firing") {
			t.Errorf("an alert whose numbers did not change:\n%s", got)
		}
		if _, _, err := b.drv.ResolveAlert(ctx, driver.ResolveAlertParams{ID: grown.ID, Message: "back to 3 or fewer", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		got = row(grown.ID)
		for _, want := range []string{"At firing: 6 tasks", "Last while firing (", "): 49 tasks", "back to 3 or fewer"} {
			if !strings.Contains(got, want) {
				t.Errorf("the resolved alert's row lacks %q:\n%s", want, got)
			}
		}
	})
}
