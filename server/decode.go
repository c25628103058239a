package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/shorten"
)

// maxDepth is the deepest nesting of arrays and objects a request body may
// have, counting the body's own object as one level.
const maxDepth = 64

// jsonSpace is the white space JSON allows between tokens.
const jsonSpace = " \t\r\n"

// decodeJSON reads r's body into dst, a pointer to a struct, strictly:
// Content-Type must be application/json (415), the body at most limit
// bytes (413), valid UTF-8 and one JSON object nested at most maxDepth
// deep, with only known fields, each once and of the right type (400,
// naming the field).
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("request body is larger than %d bytes", limit)}
	if r.ContentLength > limit {
		// Refuse before reading: a client that sent "Expect: 100-continue"
		// is told now, instead of being invited to send the body.
		return tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return tooLarge
		}
		return badRequest("reading the request body: %v", err)
	}
	return decodeBody(body, dst)
}

func checkContentType(v string) error {
	unsupported := &apiError{status: http.StatusUnsupportedMediaType, detail: fmt.Sprintf("Content-Type must be application/json, got %q", shorten.String(v, 64))}
	if v == "" {
		return unsupported
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != "application/json" {
		return unsupported
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return &apiError{status: http.StatusUnsupportedMediaType, detail: fmt.Sprintf("charset must be utf-8, got %q", shorten.String(cs, 64))}
	}
	return nil
}

// decodeBody decodes a whole request body into dst (see decodeJSON).
func decodeBody(body []byte, dst any) error {
	if len(bytes.Trim(body, jsonSpace)) == 0 {
		return badRequest("request body is empty: send a JSON object")
	}
	if !utf8.Valid(body) {
		// encoding/json would silently replace the bad bytes, changing
		// payloads and keys: refuse instead.
		return badRequest("request body is not valid UTF-8")
	}
	if err := scanBody(body); err != nil {
		return err
	}
	return decodeValue(bytes.Trim(body, jsonSpace), reflect.ValueOf(dst).Elem(), "")
}

// scanBody checks, before anything is decoded, that body is one
// syntactically valid JSON object nested at most maxDepth deep with
// nothing after it. A well-formed body passes a quick check; any other is
// scanned token by token to word the error.
func scanBody(body []byte) error {
	if wellFormed(body) {
		return nil
	}
	return scanTokens(body)
}

// wellFormed reports whether body passes scanBody, without allocating:
// json.Valid checks the syntax and that one value fills the body, a walk
// over the bytes the object's first byte and its depth.
func wellFormed(body []byte) bool {
	t := bytes.TrimLeft(body, jsonSpace)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return false
	}
	depth, inString, escaped := 0, false, false
	for _, b := range t {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = b == '\\'
			inString = b != '"'
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > maxDepth {
				return false
			}
		case b == '}' || b == ']':
			depth--
		}
	}
	return true
}

// scanTokens is scanBody token by token, wording what is wrong.
func scanTokens(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	depth := 0
	for first := true; first || depth > 0; first = false {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(err)
		}
		if first && tok != json.Delim('{') {
			return badRequest("request body must be a JSON object")
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > maxDepth {
				return badRequest("request body is nested deeper than %d levels (at byte %d)", maxDepth, dec.InputOffset())
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("unexpected data after the JSON object at byte %d", dec.InputOffset())
	}
	return nil
}

func syntaxError(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return badRequest("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return badRequest("invalid JSON: unexpected end of the body")
	}
	return badRequest("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	timeType        = reflect.TypeFor[time.Time]()
	durationType    = reflect.TypeFor[Duration]()
)

// decodeValue decodes raw, already checked to be valid JSON, into v. It
// walks structs, maps and slices itself so that an error names its field with
// its full path ("tasks[3].delay"); other values go to encoding/json.
// Object keys match json tags exactly; unknown and repeated keys are
// errors. null leaves the zero value, except in a json.RawMessage, which
// keeps it, and in a map, where it is an error; a RawMessage is stored
// compacted. A string field tagged api:"nonempty" may be absent but not
// "".
func decodeValue(raw []byte, v reflect.Value, path string) error {
	t := v.Type()
	if t == rawMessageType {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return fieldError(path, "invalid JSON")
		}
		v.SetBytes(buf.Bytes())
		return nil
	}
	if string(raw) == "null" {
		v.SetZero()
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return decodeLeaf(raw, v, path)
	}
	if t.Kind() == reflect.String {
		// encoding/json would turn a lone surrogate into U+FFFD, so
		// "\ud800" and "\ufffd" would name one key: refuse it, as in a
		// payload.
		if r, bad := digest.BadEscape(raw); bad && r != 0 {
			return fieldError(path, "contains a lone UTF-16 surrogate \\u%04x: pair it or remove it", r)
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := decodeValue(raw, p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		return decodeObject(raw, v, path)
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return decodeMap(raw, v, path)
		}
	case reflect.Slice:
		return decodeArray(raw, v, path)
	}
	return decodeLeaf(raw, v, path)
}

func decodeObject(raw []byte, v reflect.Value, path string) error {
	fields := jsonFields(v.Type())
	seen := map[string]bool{}
	return eachMember(raw, path, func(key string, val json.RawMessage) error {
		i, ok := fields[key]
		if !ok {
			return badRequest("unknown field %q", join(path, shorten.String(key, 64)))
		}
		if seen[key] {
			return badRequest("field %q appears more than once", join(path, shorten.String(key, 64)))
		}
		seen[key] = true
		f := v.Field(i)
		if err := decodeValue(val, f, join(path, key)); err != nil {
			return err
		}
		if f.Kind() == reflect.String && f.Len() == 0 && v.Type().Field(i).Tag.Get("api") == "nonempty" && string(val) != "null" {
			return fieldError(join(path, key), "must not be empty: leave it out instead")
		}
		return nil
	})
}

func decodeMap(raw []byte, v reflect.Value, path string) error {
	m := reflect.MakeMap(v.Type())
	err := eachMember(raw, path, func(key string, val json.RawMessage) error {
		k := reflect.ValueOf(key).Convert(v.Type().Key())
		if m.MapIndex(k).IsValid() {
			return badRequest("field %q appears more than once", join(path, shorten.String(key, 64)))
		}
		e := reflect.New(v.Type().Elem()).Elem()
		if string(val) == "null" {
			// Stored, it would read back as the zero value: refuse rather
			// than change it.
			return fieldError(join(path, key), "must be %s, got null", describe(e.Type()))
		}
		if err := decodeValue(val, e, join(path, key)); err != nil {
			return err
		}
		m.SetMapIndex(k, e)
		return nil
	})
	if err != nil {
		return err
	}
	v.Set(m)
	return nil
}

// eachMember calls fn with every member of the JSON object raw, in order.
func eachMember(raw []byte, path string, fn func(key string, val json.RawMessage) error) error {
	if raw[0] != '{' {
		return fieldError(path, "must be an object, got %s", jsonKind(raw))
	}
	// raw is valid JSON (scanBody): walk it byte by byte. json.Decoder
	// builds an error value at the end of every member, which cost more
	// than the rest of an enqueue's decoding.
	i := skipSpace(raw, 1)
	for raw[i] != '}' {
		end := skipValue(raw, i)
		key, err := memberKey(raw[i:end])
		if err != nil {
			return syntaxError(err)
		}
		if r, bad := digest.BadEscape(raw[i:end]); bad && r != 0 {
			// Decoded, it would be U+FFFD (see decodeValue).
			return fieldError(path, "has a key with a lone UTF-16 surrogate \\u%04x: pair it or remove it", r)
		}
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the ':'
		end = skipValue(raw, i)
		if err := fn(key, json.RawMessage(raw[i:end])); err != nil {
			return err
		}
		if i = skipSpace(raw, end); raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return nil
}

// memberKey is the text of a JSON string token.
func memberKey(tok []byte) (string, error) {
	if bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1]), nil
	}
	var key string
	err := json.Unmarshal(tok, &key)
	return key, err
}

// skipSpace returns the index of the first byte at or after i in b that
// is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at i
// in b, which must be valid JSON.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing object or array
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i // the end of a number or literal
			}
		}
	}
	return i
}

func decodeArray(raw []byte, v reflect.Value, path string) error {
	if raw[0] != '[' {
		return fieldError(path, "must be an array, got %s", jsonKind(raw))
	}
	s := reflect.MakeSlice(v.Type(), 0, 0)
	i := skipSpace(raw, 1) // raw is valid JSON, as in eachMember
	for n := 0; raw[i] != ']'; n++ {
		end := skipValue(raw, i)
		e := reflect.New(v.Type().Elem()).Elem()
		if err := decodeValue(raw[i:end], e, path+"["+strconv.Itoa(n)+"]"); err != nil {
			return err
		}
		s = reflect.Append(s, e)
		if i = skipSpace(raw, end); raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	v.Set(s)
	return nil
}

// decodeLeaf decodes a value encoding/json handles whole (numbers,
// strings, maps, types with their own UnmarshalJSON) and names the field
// in its error.
func decodeLeaf(raw []byte, v reflect.Value, path string) error {
	t := v.Type()
	err := json.Unmarshal(raw, v.Addr().Interface())
	if err == nil && t == timeType {
		// time.Time reads offsets it cannot write back (+24:00): refuse them
		// rather than store a time no answer can show.
		_, err = v.Interface().(time.Time).MarshalJSON()
	}
	if err == nil {
		return nil
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return fieldError(path, "must be %s, got %s", describe(t), te.Value)
	}
	if t == timeType {
		return fieldError(path, "must be an RFC 3339 time such as \"2026-01-02T15:04:05Z\", got %s", shorten.String(string(raw), 64))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if path == "" {
		return badRequest("request body: %s", msg)
	}
	return badRequest("field %q: %s", shorten.String(path, 128), msg)
}

func fieldError(path, format string, args ...any) error {
	if path == "" {
		return badRequest("request body "+format, args...)
	}
	return badRequest("field %q "+format, append([]any{shorten.String(path, 128)}, args...)...)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldsOf caches jsonFields by struct type: the maps are only read.
var fieldsOf sync.Map // reflect.Type → map[string]int

// jsonFields maps the json names of t's fields to their indexes.
func jsonFields(t reflect.Type) map[string]int {
	if m, ok := fieldsOf.Load(t); ok {
		return m.(map[string]int)
	}
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = i
	}
	fieldsOf.Store(t, m)
	return m
}

// describe names what a value of t looks like in JSON.
func describe(t reflect.Type) string {
	switch t {
	case timeType:
		return "an RFC 3339 time string"
	case durationType:
		return "a duration string such as \"30s\""
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return t.String()
}

// jsonKind names the kind of a raw JSON value.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}
