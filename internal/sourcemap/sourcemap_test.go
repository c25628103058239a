package sourcemap

import (
	"errors"
	"strings"
	"testing"
)

func TestMessage(t *testing.T) {
	headers := map[string]string{"Message-Id": "m-7", "Empty": ""}
	header := func(name string) (string, bool) { v, ok := headers[name]; return v, ok }
	for _, tc := range []struct {
		spec, body string
		key        string // "" when rejected
		reason     string
	}{
		{"/order_id", `{"order_id": "A-1"}`, "A-1", ""},
		{"/order_id", `{"order_id": 42}`, "42", ""},
		{"/order_id", `{"order_id": 4.50e1}`, "4.50e1", ""},
		{"/a/b", `{"a": {"b": "x"}}`, "x", ""},
		{"/a/1", `{"a": ["p", "q"]}`, "q", ""},
		{"/a~1b/c~0d", `{"a/b": {"c~d": "esc"}}`, "esc", ""},
		{"/a/01", `{"a": ["p", "q"]}`, "", "nothing at /a/01"},
		{"/a/2", `{"a": ["p", "q"]}`, "", "nothing at /a/2"},
		{"/order_id", `{"other": 1}`, "", "nothing at /order_id"},
		{"/order_id", `{"order_id": null}`, "", "is null"},
		{"/order_id", `{"order_id": true}`, "", "not a string or a number"},
		{"/order_id", `{"order_id": {"x": 1}}`, "", "not a string or a number"},
		{"/order_id", `{"order_id": ""}`, "", "the key is empty"},
		{"/order_id", `not json`, "", "body is not JSON"},
		{"/order_id", `{"order_id": 1} trailing`, "", "body is not JSON"},
		{"/order_id", `[1,2]`, "", "nothing at /order_id"},
		{"header:Message-Id", `{}`, "m-7", ""},
		{"header:Missing", `{}`, "", `no header "Missing"`},
		{"header:Empty", `{}`, "", `no header "Empty"`},
		{"header:Message-Id", `oops`, "", "body is not JSON"},
	} {
		key, err := Message(tc.spec, []byte(tc.body), 1<<20, header)
		if tc.reason == "" {
			if err != nil || key != tc.key {
				t.Errorf("%s on %s: key %q, err %v; want %q", tc.spec, tc.body, key, err, tc.key)
			}
			continue
		}
		if !errors.Is(err, ErrReject) || !strings.Contains(Reason(err), tc.reason) {
			t.Errorf("%s on %s: err %v; want a rejection saying %q", tc.spec, tc.body, err, tc.reason)
		}
	}
	if _, err := Message("/k", []byte(`{"k": "12345"}`), 10, nil); err == nil || !strings.Contains(Reason(err), "over the limit of 10") {
		t.Errorf("a 14-byte body over a 10-byte limit: %v", err)
	}
	long := `{"k": "` + strings.Repeat("x", MaxKey+1) + `"}`
	if _, err := Message("/k", []byte(long), 1<<20, nil); err == nil || !strings.Contains(Reason(err), "over 1000") {
		t.Errorf("a key over MaxKey: %v", err)
	}
}

func TestValidateSpec(t *testing.T) {
	for _, ok := range []string{"/order_id", "/a/b", "/a~1b", "header:Message-Id", "/"} {
		if err := ValidateSpec(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "order_id", "header:", "header:a b", "header:a:b", "/a~2", "/a~", strings.Repeat("/x", 600)} {
		if err := ValidateSpec(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestHeaders(t *testing.T) {
	h := Headers(map[string][]string{"Order-Id": {"o-1", "o-2"}, "Empty": {}}, "amqp-7")
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"order-id", "o-1", true}, // any case; the first value
		{"ORDER-ID", "o-1", true},
		{"Empty", "", false},
		{"missing", "", false},
		{"message-id", "amqp-7", true}, // the broker's id, when no header has the name
		{"Message_ID", "amqp-7", true},
	} {
		if v, ok := h(tc.name); v != tc.want || ok != tc.ok {
			t.Errorf("%s: %q %v, want %q %v", tc.name, v, ok, tc.want, tc.ok)
		}
	}
	if v, ok := Headers(map[string][]string{"Message-Id": {"hdr"}}, "prop")("message-id"); v != "hdr" || !ok {
		t.Errorf("a header named message-id wins over the property: %q %v", v, ok)
	}
	if _, ok := Headers(nil, "")("message-id"); ok {
		t.Error("no headers and no message id: found one")
	}
}
