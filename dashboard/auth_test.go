package dashboard

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/server"
)

// get fetches path with cookie c (nil: none).
func (b *bundle) get(t *testing.T, path string, c *http.Cookie) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", b.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return response{status: resp.StatusCode, header: resp.Header}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{Tokens: testTokens})

	// Unauthenticated pages redirect to the login form.
	r := b.do(t, "GET", "/queues?x=1", "", nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next="+url.QueryEscape("/queues?x=1") {
		t.Errorf("GET /queues without a session: %d Location %q", r.status, r.header.Get("Location"))
	}
	r = b.do(t, "GET", "/login", "", nil)
	if r.status != http.StatusOK || !strings.Contains(r.body, `id="login-form"`) || strings.Contains(r.body, `id="nav"`) {
		t.Errorf("login page: %d %s", r.status, r.body)
	}
	checkPage(t, "/login", r)

	// A bad token shows the form again with an error, and no cookie.
	r = b.do(t, "POST", "/login", "", url.Values{"token": {"wrong"}})
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, `id="login-error"`) || r.header.Get("Set-Cookie") != "" {
		t.Errorf("bad token: %d %v %s", r.status, r.header, r.body)
	}

	// A good token sets the cookie with its flags.
	c := b.login(t, readToken)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Errorf("session cookie flags: %+v", c)
	}
	if d := time.Until(c.Expires); d < 11*time.Hour || d > 13*time.Hour {
		t.Errorf("session expires in %v, want 12h", d)
	}
	if strings.Contains(c.Value, readToken) {
		t.Errorf("cookie holds the token: %q", c.Value)
	}
	if r := b.get(t, "/tasks", c); r.status != http.StatusOK {
		t.Errorf("GET /tasks with the session: %d", r.status)
	}
	// A forged or tampered cookie is refused.
	for _, v := range []string{c.Value + "x", "AAAA." + strings.SplitN(c.Value, ".", 2)[1], "garbage"} {
		if r := b.get(t, "/tasks", &http.Cookie{Name: sessionCookie, Value: v}); r.status != http.StatusSeeOther {
			t.Errorf("tampered cookie %q: %d", v, r.status)
		}
	}

	// Another process with the same tokens accepts the session; one whose
	// tokens changed does not.
	same := setup(t, "sqlite", Options{Tokens: testTokens})
	if r := same.get(t, "/tasks", c); r.status != http.StatusOK {
		t.Errorf("same tokens elsewhere: %d", r.status)
	}
	fewer := setup(t, "sqlite", Options{Tokens: testTokens[:1]})
	if r := fewer.get(t, "/tasks", c); r.status != http.StatusSeeOther {
		t.Errorf("token removed: session still accepted (%d)", r.status)
	}

	// An expired session is refused.
	h, err := New(b.client, Options{Tokens: testTokens, Now: func() time.Time { return time.Now().Add(13 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	late := httptest.NewServer(h)
	defer late.Close()
	if r := (&bundle{srv: late}).get(t, "/tasks", c); r.status != http.StatusSeeOther {
		t.Errorf("expired session: %d", r.status)
	}

	// The login redirect goes only to paths of the dashboard.
	for next, want := range map[string]string{"/dead": "/dead", "//evil.example/": "/", "https://evil.example/": "/"} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", b.srv.URL+"/login", strings.NewReader(url.Values{"token": {adminToken}, "next": {next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); got != want {
			t.Errorf("login next %q: Location %q, want %q", next, got, want)
		}
	}

	// Logout deletes the cookie.
	admin := b.login(t, adminToken)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", b.srv.URL+"/logout", nil)
	req.AddCookie(admin)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("logout: %d %v", resp.StatusCode, resp.Header)
	}
	// The logged-in layout names the role and offers logout.
	req, _ = http.NewRequestWithContext(t.Context(), "GET", b.srv.URL+"/nodes", nil)
	req.AddCookie(admin)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(body.String(), `id="logout-form"`) || !strings.Contains(body.String(), `id="role" class="role">admin<`) {
		t.Errorf("layout for a session shows no role or logout")
	}
}

// TestLoginTLS: the cookie is Secure when the request came over TLS.
func TestLoginTLS(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{Tokens: testTokens})
	h, err := New(b.client, Options{Tokens: testTokens, Prefix: "/ui/"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // test server
	resp, err := client.PostForm(srv.URL+"/ui/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs := resp.Cookies()
	if len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/ui/" {
		t.Errorf("TLS login cookie: %+v", cs)
	}
	if got := resp.Header.Get("Location"); got != "/ui/" {
		t.Errorf("login redirect under a prefix: %q", got)
	}
}

// TestCrossOrigin: a browser's cross-origin POST is refused, even with an
// admin session.
func TestCrossOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{Tokens: testTokens})
	for _, p := range []string{"/queues/default", "/login", "/logout", "/dead/matching"} {
		r := b.do(t, "POST", p, adminToken, url.Values{"op": {"pause"}, "token": {adminToken}}, "Sec-Fetch-Site", "cross-site")
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "Cross-origin request refused") {
			t.Errorf("cross-site POST %s: %d", p, r.status)
		}
		checkPage(t, p, r)
		r = b.do(t, "POST", p, adminToken, url.Values{"op": {"pause"}}, "Origin", "https://evil.example")
		if r.status != http.StatusForbidden {
			t.Errorf("POST %s with a foreign Origin: %d", p, r.status)
		}
	}
	qs, err := b.client.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Paused {
			t.Errorf("cross-origin POST paused %s", q.Name)
		}
	}
	// Same origin works.
	if r := b.do(t, "POST", "/queues/default", adminToken, url.Values{"op": {"pause"}}, "Sec-Fetch-Site", "same-origin"); r.status != http.StatusSeeOther {
		t.Errorf("same-origin POST: %d %s", r.status, r.body)
	}
}

// TestNoTokens: without tokens everyone is admin but only loopback Hosts
// are answered.
func TestNoTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{})
	if r := b.do(t, "GET", "/", "", nil); r.status != http.StatusOK || strings.Contains(r.body, "logout-form") {
		t.Errorf("no tokens: GET / %d", r.status)
	}
	if r := b.do(t, "GET", "/login", "", nil); r.status != http.StatusSeeOther {
		t.Errorf("no tokens: /login %d, want a redirect home", r.status)
	}
	for _, host := range []string{"evil.example", "evil.example:80", "10.0.0.1"} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", b.srv.URL+"/", nil)
		req.Host = host
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Security-Policy") != CSP {
			t.Errorf("Host %s: %d", host, resp.StatusCode)
		}
	}
	h, err := New(b.client, Options{Prefix: "/ui/"})
	if err != nil {
		t.Fatal(err)
	}
	ui := &bundle{srv: httptest.NewServer(h)}
	defer ui.srv.Close()
	for _, p := range []string{"/ui/", "/ui/queues", "/ui/tasks", "/ui/dead", "/ui/alerts", "/ui/nodes"} {
		if r := ui.do(t, "GET", p, "", nil); r.status != http.StatusOK || !strings.Contains(r.body, `href="/ui/static/`) || !strings.Contains(r.body, `id="nav-queues" href="/ui/queues"`) {
			t.Errorf("GET %s under a prefix: %d", p, r.status)
		}
	}
	if r := ui.do(t, "GET", "/queues", "", nil); r.status != http.StatusNotFound {
		t.Errorf("GET /queues outside the prefix: %d", r.status)
	}
	if _, err := New(b.client, Options{Prefix: "ui"}); err == nil {
		t.Error("prefix without slashes accepted")
	}
	if _, err := New(b.client, Options{Tokens: []server.Token{{Value: "x", Role: "boss"}}}); err == nil {
		t.Error("unknown role accepted")
	}
	if _, err := New(b.client, Options{Tokens: []server.Token{{Value: "x", Role: server.RoleRead}, {Value: "x", Role: server.RoleAdmin}}}); err == nil {
		t.Error("duplicate token accepted")
	}
}

// TestStatic: static files are served with a long cache under the
// content version, and the vendored libraries are there.
func TestStatic(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{Tokens: testTokens})
	for _, f := range []string{"app.css", "app.js", "vendor/htmx/htmx.min.js", "vendor/uplot/uPlot.iife.min.js", "vendor/uplot/uPlot.min.css"} {
		r := b.do(t, "GET", "/static/"+staticVersion()+"/"+f, "", nil)
		if r.status != http.StatusOK || !strings.Contains(r.header.Get("Cache-Control"), "immutable") || r.header.Get("Content-Security-Policy") != CSP {
			t.Errorf("%s: %d %v", f, r.status, r.header)
		}
	}
	if r := b.do(t, "GET", "/static/"+staticVersion()+"/nope.js", "", nil); r.status != http.StatusNotFound {
		t.Errorf("missing static file: %d", r.status)
	}
	if r := b.do(t, "GET", "/static/"+staticVersion()+"/../dashboard.go", "", nil); r.status == http.StatusOK {
		t.Errorf("path escape served")
	}
}
