package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// access says which roles may call a route.
type access uint8

const (
	public      access = iota // no token needed
	admins                    // admin
	readers                   // admin, read
	enqueuers                 // admin, enqueue
	taskReaders               // admin, read, enqueue: GET /v1/tasks/{id}
)

func (a access) allows(r Role) bool {
	switch a {
	case public:
		return true
	case readers:
		return r == RoleAdmin || r == RoleRead
	case enqueuers:
		return r == RoleAdmin || r == RoleEnqueue
	case taskReaders:
		return r == RoleAdmin || r == RoleRead || r == RoleEnqueue
	}
	return r == RoleAdmin
}

// credential is a configured token, kept as its SHA-256 so that every
// comparison takes the same time whatever the lengths involved.
type credential struct {
	digest [sha256.Size]byte
	role   Role
}

func credentials(tokens []Token) []credential {
	out := make([]credential, len(tokens))
	for i, t := range tokens {
		out[i] = credential{digest: sha256.Sum256([]byte(t.Value)), role: t.Role}
	}
	return out
}

// authenticate returns the role of the request's bearer token. Without
// configured tokens every request is admin. The token is compared in
// constant time against every configured one, without stopping at a match.
func (s *server) authenticate(r *http.Request) (Role, bool) {
	if len(s.creds) == 0 {
		return RoleAdmin, true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range s.creds {
		eq := subtle.ConstantTimeCompare(d[:], s.creds[i].digest[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return "", false
	}
	return s.creds[match].role, true
}
