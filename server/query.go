package server

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
)

// Listing limits: the default page size and the largest (keel's List
// limit).
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// queryParams returns r's query parameters, rejecting any not in allowed
// and any given twice.
func queryParams(r *http.Request, allowed ...string) (map[string]string, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("malformed query string: %v", err)
	}
	out := make(map[string]string, len(values))
	for name, vs := range values {
		if !slices.Contains(allowed, name) {
			return nil, badRequest("unknown query parameter %q; this route takes %s", shorten.String(name, 64), strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, badRequest("query parameter %q given %d times", name, len(vs))
		}
		// No database stores these in a name, and some refuse them in a
		// query: answer alike everywhere.
		switch {
		case !utf8.ValidString(vs[0]):
			return nil, badRequest("query parameter %q is not valid UTF-8", name)
		case strings.IndexByte(vs[0], 0) >= 0:
			return nil, badRequest("query parameter %q contains the NUL character", name)
		}
		out[name] = vs[0]
	}
	return out, nil
}

// names splits a comma-separated list of names, dropping spaces around
// them and empty entries; nil when there is none. The client checks each.
func names(s string) []string {
	var out []string
	for n := range strings.SplitSeq(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// queryTime parses an optional RFC 3339 query parameter.
func queryTime(q map[string]string, name string) (time.Time, error) {
	v, ok := q[name]
	if !ok || v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badRequest("query parameter %q must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", name, shorten.String(v, 64))
	}
	return t, nil
}

// queryFinished parses the optional finished_after and finished_before
// parameters into p.
func queryFinished(q map[string]string, p *keel.Filter) (err error) {
	if p.FinishedAfter, err = queryTime(q, "finished_after"); err != nil {
		return err
	}
	p.FinishedBefore, err = queryTime(q, "finished_before")
	return err
}

// listPage lists one page of tasks matching p from the cursor and limit
// parameters of q, newest first, and the cursor of the next page if there
// is one.
func (s *server) listPage(ctx context.Context, p keel.Filter, q map[string]string) (TaskList, error) {
	limit := defaultLimit
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return TaskList{}, badRequest("query parameter \"limit\" must be an integer in 1..%d, got %q", maxLimit, shorten.String(v, 64))
		}
		limit = n
	}
	if v, ok := q["cursor"]; ok {
		id, err := decodeCursor(v)
		if err != nil {
			return TaskList{}, err
		}
		p.BeforeID = id
	}
	// One task more than the page tells whether another page follows.
	p.Limit = min(limit+1, maxLimit)
	infos, err := s.c.List(ctx, p)
	if err != nil {
		return TaskList{}, err
	}
	more := len(infos) > limit
	if more {
		infos = infos[:limit]
	} else if len(infos) == maxLimit {
		probe := p
		probe.BeforeID, probe.Limit = infos[len(infos)-1].ID, 1
		next, err := s.c.List(ctx, probe)
		if err != nil {
			return TaskList{}, err
		}
		more = len(next) > 0
	}
	list := TaskList{Tasks: make([]Task, len(infos))}
	for i, info := range infos {
		list.Tasks[i] = taskFromInfo(info)
	}
	if more {
		list.NextCursor = encodeCursor(infos[len(infos)-1].ID)
	}
	return list, nil
}

// A cursor is the last id of a page, opaque to callers.
const cursorPrefix = "before:"

func encodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if v, ok := strings.CutPrefix(string(b), cursorPrefix); ok {
			if id, err := strconv.ParseInt(v, 10, 64); err == nil && id > 0 {
				return id, nil
			}
		}
	}
	return 0, badRequest("invalid cursor %q: pass the next_cursor of the previous page unchanged", shorten.String(c, 64))
}
