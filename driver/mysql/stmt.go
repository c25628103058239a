package mysql

import "strings"

// Statement templates: the {now} marker and the list markers of the SQL in
// queries.go become placeholders here.

// nowExpr replaces {now}: its argument is the caller's time or NULL.
const nowExpr = `CAST(COALESCE(?, UTC_TIMESTAMP(6)) AS DATETIME(6))`

// stmt is a query whose {now} markers became placeholders; nowAt marks,
// for each placeholder in order, whether it takes the now argument.
type stmt struct {
	text  string
	nowAt []bool
}

// prepare turns a template into a stmt.
func prepare(tmpl string) stmt {
	var s stmt
	parts := strings.Split(tmpl, "{now}")
	for i, p := range parts {
		for range strings.Count(p, "?") {
			s.nowAt = append(s.nowAt, false)
		}
		if i < len(parts)-1 {
			s.nowAt = append(s.nowAt, true)
		}
	}
	s.text = strings.Join(parts, nowExpr)
	return s
}

// args puts now in every {now} slot and args, in order, in the others.
func (s stmt) args(now any, args ...any) []any {
	out := make([]any, 0, len(s.nowAt))
	for _, isNow := range s.nowAt {
		if isNow {
			out = append(out, now)
		} else {
			out = append(out, args[0])
			args = args[1:]
		}
	}
	return out
}

// with expands a list marker into n comma-separated groups of group.
func (s stmt) with(marker, group string, n int, groupArgs int) stmt {
	i := strings.Index(s.text, marker)
	// Placeholders before the marker keep their places.
	before := strings.Count(s.text[:i], "?")
	list := strings.Repeat(group+", ", n)
	list = list[:len(list)-2]
	nowAt := append([]bool{}, s.nowAt[:before]...)
	for range n * groupArgs {
		nowAt = append(nowAt, false)
	}
	nowAt = append(nowAt, s.nowAt[before:]...)
	return stmt{text: s.text[:i] + list + s.text[i+len(marker):], nowAt: nowAt}
}
