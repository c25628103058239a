package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/server"
)

// sessionCookie is the name of the session cookie.
const sessionCookie = "keel_session"

// sessionTTL is how long a login lasts.
const sessionTTL = 12 * time.Hour

// digestPrefix is how many bytes of a token's SHA-256 a session names it by.
const digestPrefix = 16

// sessions checks tokens and the session cookies made from them. A cookie
// holds no token: it is an expiry, the first 16 bytes of the token's
// SHA-256 and an HMAC-SHA256 over both, keyed by a digest of every
// configured token and role. Every process configured with the same tokens
// accepts the others' sessions; changing or removing any token (or a
// role) changes the key and ends every session.
type sessions struct {
	creds []credential
	key   []byte
}

// credential is a configured token, kept as its SHA-256.
type credential struct {
	digest [sha256.Size]byte
	Role   server.Role
}

func newSessions(tokens []server.Token) (*sessions, error) {
	s := &sessions{}
	seen := map[string]int{}
	for i, t := range tokens {
		switch {
		case t.Value == "":
			return nil, fmt.Errorf("dashboard: Options.Tokens[%d]: empty token value", i)
		case t.Role != server.RoleAdmin && t.Role != server.RoleRead && t.Role != server.RoleEnqueue:
			return nil, fmt.Errorf("dashboard: Options.Tokens[%d]: unknown role %q (use %q, %q or %q)", i, t.Role, server.RoleAdmin, server.RoleEnqueue, server.RoleRead)
		}
		if j, dup := seen[t.Value]; dup {
			return nil, fmt.Errorf("dashboard: Options.Tokens[%d]: same value as Tokens[%d]", i, j)
		}
		seen[t.Value] = i
		s.creds = append(s.creds, credential{digest: sha256.Sum256([]byte(t.Value)), Role: t.Role})
	}
	if len(tokens) > 0 {
		// The key: every token and role, in a fixed order.
		parts := make([]string, len(tokens))
		for i, t := range tokens {
			parts[i] = fmt.Sprintf("%d:%s:%s", len(t.Value), t.Value, t.Role)
		}
		slices.Sort(parts)
		k := sha256.Sum256([]byte("keel dashboard session v1\x00" + strings.Join(parts, "\x00")))
		s.key = k[:]
	}
	return s, nil
}

// enabled reports whether tokens are configured (login needed).
func (s *sessions) enabled() bool { return len(s.creds) > 0 }

// viewer is who is looking: the role of the session (or bearer token).
type viewer struct {
	Role   server.Role
	Authed bool // logged in with a token (logout makes sense)
}

func (v *viewer) Admin() bool { return v != nil && v.Role == server.RoleAdmin }

// check returns the index of the credential token matches, in constant
// time over every configured token, or -1.
func (s *sessions) check(token string) int {
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range s.creds {
		eq := subtle.ConstantTimeCompare(d[:], s.creds[i].digest[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	return match
}

// viewer returns who makes r: everyone is admin without tokens; else the
// role of a valid session cookie or bearer token, or nil.
func (s *sessions) viewer(r *http.Request, now time.Time) *viewer {
	if !s.enabled() {
		return &viewer{Role: server.RoleAdmin}
	}
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		if i := s.check(strings.TrimSpace(token)); i >= 0 {
			return &viewer{Role: s.creds[i].Role}
		}
		return nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	if i := s.open(c.Value, now); i >= 0 {
		return &viewer{Role: s.creds[i].Role, Authed: true}
	}
	return nil
}

// seal makes the cookie value of a session of credential i until exp.
func (s *sessions) seal(i int, exp time.Time) string {
	payload := make([]byte, 8, 8+digestPrefix)
	binary.BigEndian.PutUint64(payload, uint64(exp.Unix()))
	payload = append(payload, s.creds[i].digest[:digestPrefix]...)
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(m.Sum(nil))
}

// open checks a cookie value and returns the credential it names, or -1
// when it is malformed, forged, expired or names no configured token.
func (s *sessions) open(v string, now time.Time) int {
	p, sig, ok := strings.Cut(v, ".")
	if !ok {
		return -1
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || len(payload) != 8+digestPrefix {
		return -1
	}
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	if !hmac.Equal(mac, m.Sum(nil)) {
		return -1
	}
	if exp := time.Unix(int64(binary.BigEndian.Uint64(payload[:8])), 0); !now.Before(exp) {
		return -1
	}
	for i := range s.creds {
		if subtle.ConstantTimeCompare(payload[8:], s.creds[i].digest[:digestPrefix]) == 1 {
			return i
		}
	}
	return -1
}

// cookie is the session cookie for value, expiring at exp (a past exp
// deletes it).
func (d *dash) cookie(r *http.Request, value string, exp time.Time) *http.Cookie {
	c := &http.Cookie{
		Name: sessionCookie, Value: value, Path: d.prefix, Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(exp.Sub(d.now()).Seconds())
	}
	return c
}

// loginPage shows the login form.
func (d *dash) loginPage(w http.ResponseWriter, r *http.Request, v *viewer) error {
	if !d.auth.enabled() {
		http.Redirect(w, r, d.prefix, http.StatusSeeOther)
		return nil
	}
	return d.render(w, r, http.StatusOK, "login", v, loginData{Next: d.safeNext(r.URL.Query().Get("next"))})
}

type loginData struct {
	Next, Error string
}

// login checks the posted token and starts a session.
func (d *dash) login(w http.ResponseWriter, r *http.Request, v *viewer) error {
	if !d.auth.enabled() {
		http.Redirect(w, r, d.prefix, http.StatusSeeOther)
		return nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return badRequest("could not read the login form: %v", err)
	}
	next := d.safeNext(r.PostForm.Get("next"))
	i := d.auth.check(strings.TrimSpace(r.PostForm.Get("token")))
	if i < 0 {
		d.log.Warn("keel dashboard: failed login", "remote", r.RemoteAddr)
		return d.render(w, r, http.StatusUnauthorized, "login", v, loginData{Next: next, Error: "That token is not valid. Use one of the tokens configured for keel serve ([[tokens]] or KEEL_TOKENS)."})
	}
	exp := d.now().Add(sessionTTL)
	http.SetCookie(w, d.cookie(r, d.auth.seal(i, exp), exp))
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// logout ends the session.
func (d *dash) logout(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	http.SetCookie(w, d.cookie(r, "", time.Unix(0, 0)))
	http.Redirect(w, r, d.prefix+"login", http.StatusSeeOther)
	return nil
}

// safeNext keeps a post-login destination only when it is a path under
// the prefix (no open redirect).
func (d *dash) safeNext(next string) string {
	if !strings.HasPrefix(next, d.prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return d.prefix
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
