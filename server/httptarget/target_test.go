package httptarget_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/server/httptarget"
)

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	got := httptarget.Target{URL: "http://x"}.WithDefaults()
	if got.ConnectTimeout != 2*time.Second || got.ReadTimeout != 10*time.Second || got.MaxResultBytes != 64<<10 {
		t.Errorf("defaults: %+v, want 2s, 10s, 64 KiB", got)
	}
	set := httptarget.Target{URL: "http://x", ConnectTimeout: -time.Second, ReadTimeout: time.Minute, MaxResultBytes: -1}.WithDefaults()
	if set.ConnectTimeout != -time.Second || set.ReadTimeout != time.Minute || set.MaxResultBytes != -1 {
		t.Errorf("non-zero fields changed: %+v", set)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := httptarget.Target{URL: "https://example.com/keel?x=1", Headers: map[string]string{"Authorization": "Bearer t", "User-Agent": "acme"}}
	if err := good.WithDefaults().Validate(); err != nil {
		t.Errorf("valid target: %v", err)
	}
	err := httptarget.Target{URL: "https://example.com/keel"}.Validate()
	if err == nil || err.Error() != "httptarget: ConnectTimeout must be positive, got 0s" {
		t.Errorf("Validate without defaults: %v, want the zero ConnectTimeout named", err)
	}
}

func TestRegisterRejectsBadTargets(t *testing.T) {
	t.Parallel()
	ok := httptarget.Target{URL: "http://127.0.0.1:9/hook"}
	with := func(mod func(*httptarget.Target)) httptarget.Target {
		tg := ok
		mod(&tg)
		return tg
	}
	header := func(name, value string) httptarget.Target {
		return with(func(tg *httptarget.Target) { tg.Headers = map[string]string{name: value} })
	}
	cases := []struct {
		name   string
		target httptarget.Target
		want   string
	}{
		{"empty URL", httptarget.Target{}, "URL is required"},
		{"relative URL", httptarget.Target{URL: "/hook"}, `URL "/hook" must be absolute with scheme http or https`},
		{"host without scheme", httptarget.Target{URL: "example.com/hook"}, `URL "example.com/hook" must be absolute with scheme http or https`},
		{"ftp", httptarget.Target{URL: "ftp://example.com/x"}, `URL "ftp://example.com/x" must be absolute with scheme http or https`},
		{"no host", httptarget.Target{URL: "http:///hook"}, `URL "http:///hook" has no host`},
		{"port only", httptarget.Target{URL: "http://:8080/hook"}, `URL "http://:8080/hook" has no host`},
		{"bad escape", httptarget.Target{URL: "http://example.com/%zz"}, `URL "http://example.com/%zz" is not a valid URL`},
		{"password hidden", httptarget.Target{URL: "ftp://u:pw@example.com/"}, `URL "ftp://u:xxxxx@example.com/" must be absolute`},
		{"negative connect timeout", with(func(tg *httptarget.Target) { tg.ConnectTimeout = -time.Second }), "ConnectTimeout must be positive, got -1s"},
		{"negative read timeout", with(func(tg *httptarget.Target) { tg.ReadTimeout = -1 }), "ReadTimeout must be positive, got -1ns"},
		{"negative result size", with(func(tg *httptarget.Target) { tg.MaxResultBytes = -5 }), "MaxResultBytes must be positive, got -5"},
		{"huge result size", with(func(tg *httptarget.Target) { tg.MaxResultBytes = 1 << 30 }), "MaxResultBytes must be at most 16777216"},
		{"Keel header", header("Keel-Attempt", "9"), `Headers: "Keel-Attempt" is set by keel and cannot be overridden`},
		{"keel header lower case", header("keel-task-id", "1"), `Headers: "keel-task-id" is set by keel`},
		{"new Keel header", header("Keel-Anything", "1"), `Headers: "Keel-Anything" is set by keel`},
		{"Idempotency-Key", header("idempotency-key", "k"), `Headers: "idempotency-key" is set by keel`},
		{"Content-Type", header("Content-Type", "text/plain"), `Headers: "Content-Type" is set by keel`},
		{"Host", header("Host", "evil"), `Headers: "Host" is set by keel`},
		{"Content-Length", header("Content-Length", "1"), `Headers: "Content-Length" is set by keel`},
		{"bad header name", header("Bad Name", "v"), `Headers: invalid header name "Bad Name"`},
		{"empty header name", header("", "v"), `Headers: invalid header name ""`},
		{"header value with newline", header("X-A", "v\r\nX-B: injected"), `Headers: invalid value for "X-A"`},
		{"same header twice", with(func(tg *httptarget.Target) { tg.Headers = map[string]string{"X-A": "1", "x-a": "2"} }), `Headers: "X-A" and "x-a" name the same header`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := keel.NewHandlers()
			err := httptarget.Register(h, "hook", tc.target)
			if err == nil || !strings.HasPrefix(err.Error(), `httptarget: task type "hook": `+tc.want) {
				t.Errorf("Register: %v, want an error starting with %q", err, tc.want)
			}
			if types := h.Types(); len(types) != 0 {
				t.Errorf("Register failed but registered %v", types)
			}
			err = tc.target.WithDefaults().Validate()
			if err == nil || !strings.HasPrefix(err.Error(), "httptarget: "+tc.want) {
				t.Errorf("Validate: %v, want an error starting with %q", err, tc.want)
			}
		})
	}
}

func TestRegisterRejectsBadTypesAndOptions(t *testing.T) {
	t.Parallel()
	tg := httptarget.Target{URL: "http://127.0.0.1:9/hook"}
	cases := []struct {
		name     string
		taskType string
		opts     []keel.Option
		want     string
	}{
		{"bad type name", "bad type!", nil, `httptarget: keel: Handle: invalid task type "bad type!"`},
		{"empty type name", "", nil, `httptarget: keel: Handle: invalid task type ""`},
		{"bad option", "hook", []keel.Option{keel.MaxAttempts(0)}, "max attempts must be at least 1"},
		{"per-task option", "hook", []keel.Option{keel.Delay(time.Second)}, "apply to single tasks only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := keel.NewHandlers()
			err := httptarget.Register(h, tc.taskType, tg, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register: %v, want an error containing %q", err, tc.want)
			}
			if types := h.Types(); len(types) != 0 {
				t.Errorf("Register failed but registered %v", types)
			}
		})
	}

	h := keel.NewHandlers()
	if err := httptarget.Register(h, "hook", tg, keel.MaxAttempts(2)); err != nil {
		t.Fatalf("valid Register: %v", err)
	}
	err := httptarget.Register(h, "hook", httptarget.Target{URL: "http://127.0.0.1:9/other"})
	if err == nil || err.Error() != `httptarget: task type "hook" is already registered` {
		t.Errorf("duplicate Register: %v, want already registered", err)
	}
	if types := h.Types(); !slices.Equal(types, []string{"hook"}) {
		t.Errorf("types %v, want [hook]", types)
	}
	if err := httptarget.Register(nil, "hook", tg); err == nil {
		t.Error("Register on nil Handlers: no error")
	}
}
