package httptarget

import (
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"3", 3 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"86400", 24 * time.Hour, true},
		{"86401", 24 * time.Hour, true},
		{"99999999999999999999999", 24 * time.Hour, true},
		{now.Add(90 * time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 90 * time.Second, true},
		{now.Add(48 * time.Hour).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 24 * time.Hour, true},
		{now.Format("Mon, 02 Jan 2006 15:04:05 GMT"), 0, true},
		{now.Add(-time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"3s", 0, false},
		{"soon", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseRetryAfter(tc.value, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

// timeoutErr is a net.Error that timed out, like a dial or TLS handshake
// timeout.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestDescribeError(t *testing.T) {
	c := newCaller(Target{URL: "https://u:pw@example.com/hook?token=x"}.WithDefaults())
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: "https://example.com/hook", Err: err} }
	dial := func(err error) error { return wrap(&net.OpError{Op: "dial", Net: "tcp", Err: err}) }
	cases := []struct {
		name  string
		phase int32
		err   error
		want  string
	}{
		{"dial timeout", phaseConnecting, dial(timeoutErr{}), "connect timeout after 2s (POST https://example.com/hook)"},
		{"dial deadline", phaseConnecting, dial(os.ErrDeadlineExceeded), "connect timeout after 2s (POST https://example.com/hook)"},
		{"TLS handshake timeout", phaseConnecting, wrap(timeoutErr{}), "connect timeout after 2s (POST https://example.com/hook)"},
		{"refused", phaseConnecting, dial(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), "connect to example.com:443: connection refused"},
		{"no such host", phaseConnecting, dial(&net.DNSError{Err: "no such host", Name: "example.com", IsNotFound: true}),
			"connect to example.com:443: lookup example.com: no such host"},
		{"reset while sending", phaseConnected, wrap(&net.OpError{Op: "write", Net: "tcp", Err: &os.SyscallError{Syscall: "write", Err: syscall.ECONNRESET}}),
			"POST https://example.com/hook: connection failed while sending the request: connection reset by peer"},
		{"header timeout", phaseSent, wrap(timeoutErr{}), "read timeout after 10s: no response (POST https://example.com/hook)"},
		{"closed before response", phaseSent, wrap(io.EOF), "POST https://example.com/hook: connection failed while waiting for the response: EOF"},
		{"body timeout", phaseHeaders, timeoutErr{}, "read timeout after 10s: body incomplete (POST https://example.com/hook)"},
		{"body cut", phaseHeaders, io.ErrUnexpectedEOF, "POST https://example.com/hook: connection failed while reading the response body: unexpected EOF"},
	}
	for _, tc := range cases {
		got := describeError(c, tc.phase, tc.err)
		if got.Error() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		// keel records an error whose Timeout() is true with outcome timeout.
		var te interface{ Timeout() bool }
		if timeout := errors.As(got, &te) && te.Timeout(); timeout != strings.Contains(tc.want, "timeout") {
			t.Errorf("%s: Timeout() = %v", tc.name, timeout)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%s: the transport error is not wrapped", tc.name)
		}
	}
}

func TestConnectErrorsNameHostAndPort(t *testing.T) {
	for url, want := range map[string]string{
		"http://example.com/x":        "example.com:80",
		"https://example.com/x":       "example.com:443",
		"http://example.com:8080/x":   "example.com:8080",
		"http://[::1]/x":              "[::1]:80",
		"https://u:p@10.0.0.1:8443/x": "10.0.0.1:8443",
	} {
		if got := newCaller(Target{URL: url}.WithDefaults()).host; got != want {
			t.Errorf("%s: host %q, want %q", url, got, want)
		}
	}
}
