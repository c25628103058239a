package digest

import (
	"bytes"
	"slices"
)

// fastCanonical is Canonical in one pass over p, for the payloads almost
// every caller sends. It gives up (ok false) on anything the slow path
// might treat differently: invalid JSON, escapes in strings, characters
// encoding/json would escape, duplicate keys, deep nesting and numbers out
// of range. So it never decides an error, and for what it accepts it
// returns exactly the bytes of canonicalSlow. p must be valid UTF-8.
//
// The output is never longer than p (only whitespace is dropped), so it
// is written into one buffer of len(p) that never grows.
func fastCanonical(p []byte) (out []byte, ok bool) {
	c := fastCanon{p: p, out: make([]byte, 0, len(p))}
	c.members = c.stack[:0]
	c.skipSpace()
	if !c.value(0) {
		return nil, false
	}
	c.skipSpace()
	if c.i != len(p) {
		return nil, false
	}
	return c.out, true
}

// member is one `"key":value` of an object, as written into out.
type member struct {
	start  int // the key's opening quote
	keyEnd int // the key's closing quote
	end    int // just past the value
}

type fastCanon struct {
	p   []byte
	i   int // next byte of p to read
	out []byte
	// The members of every object still open, innermost last: an object
	// sorts and drops its own when it closes.
	members []member
	stack   [16]member
	scratch []byte // reused to reorder an object's members
}

func (c *fastCanon) skipSpace() {
	for c.i < len(c.p) {
		switch c.p[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value copies the value at c.i, nested depth levels deep (0 at the top,
// as in decode).
func (c *fastCanon) value(depth int) bool {
	if c.i >= len(c.p) {
		return false
	}
	switch b := c.p[c.i]; {
	case b == '{':
		return c.object(depth)
	case b == '[':
		return c.array(depth)
	case b == '"':
		return c.str()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	}
	return false
}

func (c *fastCanon) literal(lit string) bool {
	if len(c.p)-c.i < len(lit) || string(c.p[c.i:c.i+len(lit)]) != lit {
		return false
	}
	c.out = append(c.out, lit...)
	c.i += len(lit)
	return true
}

// number copies a number matching JSON's grammar exactly:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *fastCanon) number() bool {
	p, start := c.p, c.i
	i := start
	if p[i] == '-' {
		i++
	}
	switch {
	case i >= len(p):
		return false
	case p[i] == '0':
		i++
	case '1' <= p[i] && p[i] <= '9':
		i = skipDigits(p, i+1)
	default:
		return false
	}
	if i < len(p) && p[i] == '.' {
		d := i + 1
		if i = skipDigits(p, d); i == d {
			return false
		}
	}
	exp := false
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		exp = true
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		d := i
		if i = skipDigits(p, d); i == d {
			return false
		}
	}
	n := p[start:i]
	// Without an exponent a number has no more digits on either side of
	// the point than it has bytes, so a short one is always in range and
	// needs no string for checkNumber.
	if (exp || len(n) > maxFracDigits) && checkNumber(string(n)) != nil {
		return false
	}
	c.out = append(c.out, n...)
	c.i = i
	return true
}

func skipDigits(p []byte, i int) int {
	for i < len(p) && '0' <= p[i] && p[i] <= '9' {
		i++
	}
	return i
}

// str copies a string as written, quotes included. It declines what
// encoding/json would not write back byte for byte (with HTML escaping
// off): any escape, the control characters it escapes and U+2028 and
// U+2029, which it always escapes. Invalid UTF-8, which it replaces, was
// refused before.
func (c *fastCanon) str() bool {
	p := c.p
	for i := c.i + 1; i < len(p); i++ {
		switch b := p[i]; {
		case b == '"':
			c.out = append(c.out, p[c.i:i+1]...)
			c.i = i + 1
			return true
		case b == '\\' || b < 0x20:
			return false
		case b == 0xE2 && i+2 < len(p) && p[i+1] == 0x80 && (p[i+2] == 0xA8 || p[i+2] == 0xA9):
			return false
		}
	}
	return false
}

func (c *fastCanon) array(depth int) bool {
	if depth+1 > MaxDepth {
		return false
	}
	c.out = append(c.out, '[')
	c.i++
	c.skipSpace()
	if c.i < len(c.p) && c.p[c.i] == ']' {
		c.out = append(c.out, ']')
		c.i++
		return true
	}
	for {
		if !c.value(depth + 1) {
			return false
		}
		c.skipSpace()
		if c.i >= len(c.p) {
			return false
		}
		switch c.p[c.i] {
		case ',':
			c.out = append(c.out, ',')
			c.i++
			c.skipSpace()
		case ']':
			c.out = append(c.out, ']')
			c.i++
			return true
		default:
			return false
		}
	}
}

func (c *fastCanon) object(depth int) bool {
	if depth+1 > MaxDepth {
		return false
	}
	c.out = append(c.out, '{')
	c.i++
	c.skipSpace()
	if c.i < len(c.p) && c.p[c.i] == '}' {
		c.out = append(c.out, '}')
		c.i++
		return true
	}
	first, base := len(c.out), len(c.members)
	for {
		if c.i >= len(c.p) || c.p[c.i] != '"' {
			return false
		}
		start := len(c.out)
		if !c.str() {
			return false
		}
		keyEnd := len(c.out) - 1
		c.skipSpace()
		if c.i >= len(c.p) || c.p[c.i] != ':' {
			return false
		}
		c.out = append(c.out, ':')
		c.i++
		c.skipSpace()
		if !c.value(depth + 1) {
			return false
		}
		c.members = append(c.members, member{start: start, keyEnd: keyEnd, end: len(c.out)})
		c.skipSpace()
		if c.i >= len(c.p) {
			return false
		}
		if c.p[c.i] == '}' {
			c.i++
			break
		}
		if c.p[c.i] != ',' {
			return false
		}
		c.out = append(c.out, ',')
		c.i++
		c.skipSpace()
	}
	if !c.sortMembers(first, c.members[base:]) {
		return false
	}
	c.members = c.members[:base]
	c.out = append(c.out, '}')
	return true
}

// sortMembers puts the members ms, written from out[first:], in the order
// encoding/json gives a map's keys: byte order of the keys, which without
// escapes are the raw bytes between the quotes. It declines on a key given
// twice.
func (c *fastCanon) sortMembers(first int, ms []member) bool {
	key := func(m member) []byte { return c.out[m.start+1 : m.keyEnd] }
	sorted := true
	for i := 1; i < len(ms); i++ {
		if d := bytes.Compare(key(ms[i-1]), key(ms[i])); d >= 0 {
			if d == 0 {
				return false
			}
			sorted = false
			break
		}
	}
	if sorted {
		return true
	}
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(key(a), key(b)) })
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(key(ms[i-1]), key(ms[i])) {
			return false
		}
	}
	if c.scratch == nil {
		// Big enough for any object of p: one allocation per call.
		c.scratch = make([]byte, 0, len(c.p))
	}
	s := c.scratch[:0]
	for i, m := range ms {
		if i > 0 {
			s = append(s, ',')
		}
		s = append(s, c.out[m.start:m.end]...)
	}
	copy(c.out[first:], s)
	return true
}
