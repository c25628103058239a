package digest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting a payload may have: MariaDB's JSON check
// refuses documents nested 32 levels deep, and every database must accept
// the same payloads.
const MaxDepth = 31

// The numbers every supported database stores exactly: PostgreSQL's
// numeric, the strictest of them, holds at most this many digits before
// and after the decimal point.
const (
	maxIntDigits  = 131072
	maxFracDigits = 16383
)

// Canonical returns payload re-encoded with object keys sorted, no
// insignificant whitespace and numbers kept exactly as written. It refuses
// what would be stored differently from what was sent, or not at all on
// some database: invalid UTF-8, a lone UTF-16 surrogate escape ("\ud800"),
// the NUL character (\u0000), an object key given twice, and numbers with
// more digits than PostgreSQL's numeric holds (131072 before the decimal
// point, 16383 after). Every error names the payload.
func Canonical(payload []byte) ([]byte, error) {
	if !utf8.Valid(payload) {
		// encoding/json would replace the bad bytes with U+FFFD.
		return nil, errors.New("payload is not valid UTF-8")
	}
	if out, ok := fastCanonical(payload); ok {
		return out, nil
	}
	return canonicalSlow(payload)
}

// Check runs Canonical's checks on a JSON document that is stored as
// sent rather than canonicalized (a step's result), so that it is stored
// alike, or refused alike, on every database. Its errors name the
// document what instead of "payload".
func Check(what string, doc []byte) error {
	if _, err := Canonical(doc); err != nil {
		// Every error of Canonical begins with "payload".
		return errors.New(what + strings.TrimPrefix(err.Error(), "payload"))
	}
	return nil
}

// Depth is the deepest nesting of arrays and objects in valid JSON doc,
// counted as Canonical counts it: a scalar is 0, [] and {} are 1.
func Depth(doc []byte) int {
	depth, deepest, in := 0, 0, false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// canonicalSlow is Canonical through encoding/json. It decides every
// error and every output the fast path declines; its bytes are the ones
// already stored in digests and idempotency keys, so it stays as it was.
func canonicalSlow(payload []byte) ([]byte, error) {
	if !utf8.Valid(payload) {
		// encoding/json would replace the bad bytes with U+FFFD.
		return nil, errors.New("payload is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	v, err := decode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("payload is not valid JSON: more than one value")
	}
	// Valid JSON from here on: check the escapes the decoder has already
	// turned into text.
	if err := checkEscapes(payload); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// decode reads one JSON value from dec at nesting level depth, refusing
// repeated object keys, deep nesting and out-of-range numbers.
func decode(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("payload is not valid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '}' || t == ']' {
			return nil, fmt.Errorf("payload is not valid JSON: unexpected %q", rune(t))
		}
		if depth+1 > MaxDepth {
			return nil, fmt.Errorf("payload is nested deeper than %d levels", MaxDepth)
		}
		if t == '[' {
			arr := []any{}
			for dec.More() {
				e, err := decode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, e)
			}
			_, err := dec.Token() // ]
			return arr, wrapSyntax(err)
		}
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, wrapSyntax(err)
			}
			k, _ := kt.(string)
			if _, dup := obj[k]; dup {
				return nil, fmt.Errorf("payload: key %s appears more than once in an object", quoteShort(k))
			}
			e, err := decode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj[k] = e
		}
		_, err := dec.Token() // }
		return obj, wrapSyntax(err)
	case json.Number:
		if err := checkNumber(string(t)); err != nil {
			return nil, err
		}
	}
	return tok, nil
}

func wrapSyntax(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("payload is not valid JSON: %w", err)
}

// checkNumber refuses a JSON number (valid syntax) with more digits before
// or after the decimal point than every database can store.
func checkNumber(n string) error {
	s := n
	if s[0] == '-' {
		s = s[1:]
	}
	mant, exp := s, int64(0)
	if i := bytes.IndexAny([]byte(s), "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return outOfRange(n)
		}
		exp = e
	}
	whole, frac, _ := cutByte(mant, '.')
	// Digits after the point as written, shifted by the exponent.
	if int64(len(frac))-exp > maxFracDigits {
		return outOfRange(n)
	}
	// Digits before the point: the significant digits' position.
	digits := trimLeftZeros(whole + frac)
	if digits != "" && int64(len(digits))-int64(len(frac))+exp > maxIntDigits {
		return outOfRange(n)
	}
	return nil
}

func outOfRange(n string) error {
	return fmt.Errorf("payload: number %s is out of range: at most %d digits before the decimal point and %d after", quoteShort(n), maxIntDigits, maxFracDigits)
}

func cutByte(s string, c byte) (before, after string, found bool) {
	if i := bytes.IndexByte([]byte(s), c); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func trimLeftZeros(s string) string {
	for len(s) > 0 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

// checkEscapes scans the strings of valid JSON for \u escapes that cannot
// be stored as written: NUL, and a surrogate that is not half of a pair
// (encoding/json would store U+FFFD instead).
func checkEscapes(b []byte) error {
	switch r, found := BadEscape(b); {
	case !found:
		return nil
	case r == 0:
		return errors.New(`payload contains the NUL character (\u0000), which cannot be stored: remove it or encode the data (base64)`)
	default:
		return fmt.Errorf(`payload contains a lone UTF-16 surrogate \u%04x: pair it or remove it`, r)
	}
}

// BadEscape returns the first \u escape in the strings of valid JSON b
// (a document, or one string token) that cannot be stored as written:
// NUL (r 0), or a UTF-16 surrogate that is not half of a pair, which
// encoding/json turns into U+FFFD. found is false when there is none.
func BadEscape(b []byte) (r int, found bool) {
	if bytes.IndexByte(b, '\\') < 0 {
		return 0, false
	}
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			in = !in
		case in && c == '\\':
			i++
			if i >= len(b) || b[i] != 'u' {
				continue
			}
			r := hex4(b, i+1)
			i += 4
			switch {
			case r == 0:
				return 0, true
			case r >= 0xDC00 && r <= 0xDFFF:
				return r, true
			case r >= 0xD800 && r <= 0xDBFF:
				if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					if lo := hex4(b, i+3); lo >= 0xDC00 && lo <= 0xDFFF {
						i += 6
						continue
					}
				}
				return r, true
			}
		}
	}
	return 0, false
}

// hex4 reads the 4 hex digits at b[i:], or -1 if they are not there.
func hex4(b []byte, i int) int {
	if i+4 > len(b) {
		return -1
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	if err != nil {
		return -1
	}
	return int(v)
}

// quoteShort quotes s for an error message, shortened to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		n := 64
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return strconv.Quote(s[:n]) + "…"
	}
	return strconv.Quote(s)
}
