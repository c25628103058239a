package digest

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sameAsSlow fails t unless Canonical and canonicalSlow give the same
// bytes and the same error text for in.
func sameAsSlow(t *testing.T, in []byte) {
	t.Helper()
	got, gotErr := Canonical(in)
	want, wantErr := canonicalSlow(in)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("Canonical(%q): error %v, slow path: %v", in, gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Canonical(%q) = %q, slow path: %q", in, got, want)
	}
}

func TestFastCanonicalTakesCommonShapes(t *testing.T) {
	for _, in := range []string{
		`{"b":1,"a":[true,null,"x"]}`,
		" {\n\t\"b\" : 1 ,\r\n \"a\" : [ true , null , \"x\" ] } \n",
		`{"order_id":"A-1029","customer":{"id":88213,"email":"ana@example.com"},"total":129.90,"items":[{"sku":"X1","qty":2}]}`,
		`{"z":{"y":{"x":[]}},"a":{},"é":"日本","a!":-0,"a b":1e5,"0":0.5E-3}`,
		`"just a string"`, `-12.5e+10`, `false`, `[]`, `{}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	} {
		fast, ok := fastCanonical([]byte(in))
		if !ok {
			t.Errorf("fast path declined %q", in)
			continue
		}
		slow, err := canonicalSlow([]byte(in))
		if err != nil || !bytes.Equal(fast, slow) {
			t.Errorf("fast path gave %q for %q, slow path %q (%v)", fast, in, slow, err)
		}
	}
}

func TestFastCanonicalDeclinesWhatItCannotCopy(t *testing.T) {
	for _, in := range []string{
		`{"a\n":1}`, `"\u00e9"`, "\"a\u2028b\"", "\"a\u2029b\"", "\"tab\there\"",
		`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`, `1e400000`, `01`, `1.`, `.5`, `-`, `+1`,
		`[1,]`, `{"a":1,}`, `{} {}`, `tru`, `nul`, ``, ` `,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		if out, ok := fastCanonical([]byte(in)); ok {
			t.Errorf("fast path took %q, gave %q", in, out)
		}
	}
}

// TestCanonicalMatchesSlow compares the two paths over many generated
// documents, valid and not, in the shapes where they could differ: 20,000
// of them, or the first 2,000 under -short or the race detector (one
// goroutine: it has nothing to find, and makes the run 30 times slower;
// .ci/run runs the whole comparison without it as well).
func TestCanonicalMatchesSlow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() || raceEnabled {
		n = 2000
	}
	fast := 0
	for range n {
		var b []byte
		if r.IntN(4) == 0 {
			b = nest(r, MaxDepth-1+r.IntN(4))
		} else {
			b = genValue(r, nil, r.IntN(6))
		}
		if r.IntN(10) == 0 {
			b = append(b, trailing[r.IntN(len(trailing))]...)
		}
		if r.IntN(4) == 0 {
			b = mutate(r, b)
		}
		sameAsSlow(t, b)
		if _, ok := fastCanonical(b); ok {
			fast++
		}
	}
	// Most generated documents are plain: the fast path must take many.
	if fast < n/5 {
		t.Fatalf("fast path took only %d of %d documents", fast, n)
	}
	t.Logf("fast path took %d of %d documents", fast, n)
}

var (
	keys = []string{
		"a", "b", "a!", "a b", "A", "ab", "é", "e", "日本", "z", "", "0", "10", "9",
		"a\u2028", "\u2029", `a\n`, `\u00e9`, `\u0061`, `\ud83d\ude00`, `\u0000`, `\ud800`,
		`\"`, `\\`, "\x7f", "<&>", "\xf0\x9f\x98\x80",
	}
	strs = slices.Concat(keys, []string{"hello world", "tab\tin", `\t`, `\/`, `\b\f\r`, "x\u2028y", `\udc00x`, "\xe2\x80", "\xe9"})
	nums = []string{
		"0", "-0", "1", "-1", "12", "0.5", "-0.0", "1e5", "1E5", "1e+5", "1e-5", "1.5E-07",
		"01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "1.2.3", "--1", "Infinity", "NaN",
		"1e400000", "1e131071", "1e131072", "1e-16383", "1e-16384", "0.1e131073",
		"1e99999999999", "1e-99999999999", "0e-20000", "1.0e-16383",
		"1" + strings.Repeat("0", 131071), "1" + strings.Repeat("0", 131072),
		"0." + strings.Repeat("1", 16383), "0." + strings.Repeat("1", 16384),
		strings.Repeat("0", 20000), "-" + strings.Repeat("9", 30),
	}
	spaces   = []string{"", "", "", " ", "\n", "\t", "\r\n  ", "\v", "\f", "\u00a0"}
	trailing = []string{" ", "\n", "x", "{}", "1", ",", "]", "}", `"`, " null", "\x00"}
)

func ws(r *rand.Rand, b []byte) []byte {
	if r.IntN(3) == 0 {
		return append(b, spaces[r.IntN(len(spaces))]...)
	}
	return b
}

func genValue(r *rand.Rand, b []byte, depth int) []byte {
	b = ws(r, b)
	k := r.IntN(10)
	if depth <= 0 && k < 4 {
		k = 4 + r.IntN(6)
	}
	switch k {
	case 0, 1:
		b = append(b, '{')
		n := r.IntN(6)
		for i := range n {
			if i > 0 {
				b = ws(r, append(b, ','))
			}
			b = ws(r, b)
			b = append(b, '"')
			b = append(b, keys[r.IntN(len(keys))]...)
			b = ws(r, append(b, '"'))
			b = append(b, ':')
			b = genValue(r, b, depth-1)
		}
		b = append(ws(r, b), '}')
	case 2, 3:
		b = append(b, '[')
		n := r.IntN(5)
		for i := range n {
			if i > 0 {
				b = append(ws(r, b), ',')
			}
			b = genValue(r, b, depth-1)
		}
		b = append(ws(r, b), ']')
	case 4, 5:
		b = append(b, '"')
		b = append(b, strs[r.IntN(len(strs))]...)
		b = append(b, '"')
	case 6, 7:
		if r.IntN(2) == 0 {
			b = append(b, nums[r.IntN(len(nums))]...)
		} else {
			b = genNumber(r, b)
		}
	case 8:
		b = append(b, []string{"true", "false", "null", "tru", "nulll", "True"}[r.IntN(6)]...)
	default:
		b = append(b, []string{"1", `"s"`, "0.25", "[]", "{}"}[r.IntN(5)]...)
	}
	return ws(r, b)
}

// genNumber writes a mostly valid number of random shape.
func genNumber(r *rand.Rand, b []byte) []byte {
	digits := func(n int) {
		for range n {
			b = append(b, byte('0'+r.IntN(10)))
		}
	}
	if r.IntN(3) == 0 {
		b = append(b, '-')
	}
	digits(1 + r.IntN(25))
	if r.IntN(2) == 0 {
		b = append(b, '.')
		digits(r.IntN(20))
	}
	if r.IntN(2) == 0 {
		b = append(b, "eE"[r.IntN(2)])
		b = append(b, []string{"", "+", "-"}[r.IntN(3)]...)
		digits(r.IntN(8))
	}
	return b
}

// nest wraps a small value in depth containers, objects and arrays mixed.
func nest(r *rand.Rand, depth int) []byte {
	var open, closing []byte
	for range depth {
		if r.IntN(2) == 0 {
			open = append(open, `{"k":`...)
			closing = append(closing, '}')
		} else {
			open = append(open, '[')
			closing = append(closing, ']')
		}
	}
	b := genValue(r, open, 1)
	for i := len(closing) - 1; i >= 0; i-- {
		b = append(b, closing[i])
	}
	return b
}

// mutate breaks or bends b at random: drop, insert or change a byte, or
// cut it short.
func mutate(r *rand.Rand, b []byte) []byte {
	if len(b) == 0 {
		return append(b, "{}["[r.IntN(3)])
	}
	i := r.IntN(len(b))
	special := []byte(`{}[],:"\ 0-eE.tfn` + "\t\n\x00\xe2")
	switch r.IntN(4) {
	case 0:
		return append(b[:i:i], b[i+1:]...)
	case 1:
		c := special[r.IntN(len(special))]
		return append(append(b[:i:i], c), b[i:]...)
	case 2:
		b[i] = special[r.IntN(len(special))]
		return b
	default:
		return b[:i]
	}
}

func FuzzCanonicalMatchesSlow(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null,"x"]}`, ` { "a" : { "c":2, "b":1 } } `, `{"a":1,"a":2}`,
		`[1,-0,0.5,1e5,1E-5,-1.5e+10]`, `"é\u2028"`, "\"\u2028\"", `"\n"`, `"\ud800"`, `"\u0000"`,
		`{"a!":1,"a":2,"a b":3}`, `1e400000`, `01`, `[1,]`, `{} {}`, `nul`, "\"\x01\"", "\"caf\xe9\"",
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		sameAsSlow(t, in)
	})
}

func BenchmarkCanonical(b *testing.B) {
	small := []byte(`{"order_id":"A-10293","customer_id":88213,"total":129.90,"currency":"EUR","items":3,"rush":false}`)
	var large bytes.Buffer
	large.WriteString(`{"order":{"id":"A-10293","placed_at":"2026-11-30T12:00:00Z","customer":{"id":88213,"name":"Ana Lima","email":"ana@example.com","tags":["vip","eu"]},"items":[`)
	for i := range 14 {
		if i > 0 {
			large.WriteString(",")
		}
		large.WriteString(`{"sku":"SKU-0001","qty":2,"price":19.95,"options":{"size":"M","color":"blue","gift":false},"note":null}`)
	}
	large.WriteString(`],"shipping":{"method":"express","address":{"street":"Rua A 1","city":"Lisboa","zip":"1000-001"}}},"version":3}`)
	for _, p := range []struct {
		name    string
		payload []byte
	}{{"small", small}, {"large", large.Bytes()}} {
		for _, impl := range []struct {
			name string
			fn   func([]byte) ([]byte, error)
		}{{"slow", canonicalSlow}, {"fast", Canonical}} {
			b.Run(p.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(p.payload)))
				for b.Loop() {
					if _, err := impl.fn(p.payload); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
