package config

import (
	"strings"
	"testing"
)

// TestTracing: [tracing] is off by default, accepts host:port and URLs,
// and every bad value is an error naming its setting.
func TestTracing(t *testing.T) {
	c := load(t, Options{Path: write(t, "")})
	if c.Tracing.Enabled() || c.Tracing.ServiceName != "keel" || c.Tracing.SampleRatio != 1 {
		t.Fatalf("default tracing %+v", c.Tracing)
	}
	for _, body := range []string{
		"otlp_endpoint = \"127.0.0.1:4318\"\ninsecure = true",
		"otlp_endpoint = \"collector.internal:4318\"\nsample_ratio = 0.25\nservice_name = \"keel-eu\"",
		"otlp_endpoint = \"http://127.0.0.1:4318\"",
		"otlp_endpoint = \"https://otel.example/custom/v1/traces\"\nsample_ratio = 0",
	} {
		c := load(t, Options{Path: write(t, "[tracing]\n"+body)})
		if !c.Tracing.Enabled() {
			t.Fatalf("%q: not enabled", body)
		}
	}
	c = load(t, Options{Path: write(t, ""), Environ: []string{"KEEL_TRACING_OTLP_ENDPOINT=127.0.0.1:4318", "KEEL_TRACING_SAMPLE_RATIO=0.5"}})
	if c.Tracing.OTLPEndpoint != "127.0.0.1:4318" || c.Tracing.SampleRatio != 0.5 || c.Source("tracing.otlp_endpoint") != SourceEnv {
		t.Fatalf("from env: %+v", c.Tracing)
	}

	cases := []struct {
		name string
		file string
		env  []string
		want string
	}{
		{"ratio above 1", "sample_ratio = 1.5", nil, "tracing.sample_ratio: must be in 0..1 (the fraction of traces recorded), got 1.5"},
		{"ratio negative", "sample_ratio = -0.1", nil, "tracing.sample_ratio: must be in 0..1"},
		{"ratio nan", "sample_ratio = nan", nil, "tracing.sample_ratio: must be in 0..1"},
		{"ratio from env", "", []string{"KEEL_TRACING_SAMPLE_RATIO=2"}, "tracing.sample_ratio (from KEEL_TRACING_SAMPLE_RATIO): must be in 0..1"},
		{"ratio not a number", "", []string{"KEEL_TRACING_SAMPLE_RATIO=all"}, `KEEL_TRACING_SAMPLE_RATIO: invalid number "all"`},
		{"service name", "service_name = \" \"", nil, "tracing.service_name: must not be empty"},
		{"endpoint no port", "otlp_endpoint = \"collector\"", nil, `tracing.otlp_endpoint: must be host:port such as 127.0.0.1:4318 or an http(s) URL such as http://127.0.0.1:4318, got "collector"`},
		{"endpoint bad port", "otlp_endpoint = \"collector:http\"", nil, `tracing.otlp_endpoint: must be host:port`},
		{"endpoint port 0", "otlp_endpoint = \"127.0.0.1:0\"", nil, `tracing.otlp_endpoint: must be host:port`},
		{"endpoint no host", "otlp_endpoint = \":4318\"", nil, `tracing.otlp_endpoint: must be host:port`},
		{"endpoint scheme", "otlp_endpoint = \"grpc://collector:4317\"", nil, `tracing.otlp_endpoint: must be host:port such as 127.0.0.1:4318 or an http(s) URL`},
		{"endpoint url no host", "otlp_endpoint = \"http:///v1/traces\"", nil, `tracing.otlp_endpoint: must be host:port`},
		{"endpoint url port", "otlp_endpoint = \"http://collector:99999\"", nil, `tracing.otlp_endpoint: invalid port in "http://collector:99999"`},
		{"endpoint url query", "otlp_endpoint = \"http://collector:4318/?x=1\"", nil, `tracing.otlp_endpoint: must be host:port`},
		{"insecure https", "otlp_endpoint = \"https://collector:4318\"\ninsecure = true", nil, `tracing.insecure: is true but tracing.otlp_endpoint "https://collector:4318" is an https URL`},
		{"unknown key", "otlp_endpiont = \"127.0.0.1:4318\"", nil, "unknown key tracing.otlp_endpiont"},
		{"unknown env", "", []string{"KEEL_TRACING_ENDPOINT=127.0.0.1:4318"}, "KEEL_TRACING_ENDPOINT: unknown setting"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(Options{Path: write(t, "[tracing]\n"+tc.file), Environ: tc.env})
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}
