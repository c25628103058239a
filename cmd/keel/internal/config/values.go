package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Values lists every effective setting with its source, secrets redacted:
// the scalar fields in file order, then tokens, queues and types by name,
// then the broker sources in file order (their URLs' passwords redacted).
func (c *Config) Values() []Value {
	var out []Value
	for _, f := range fields {
		v := Value{Key: f.Key, Value: f.format(c), Source: c.Source(f.Key), Env: f.Env}
		switch f.Key {
		case "database.dsn":
			v.Value = RedactDSN(v.Value)
			if v.Value == "" {
				v.Note = "SQLite at database.db"
			}
		case "database.db":
			if c.Database.DSN != "" {
				v.Note = "unused: database.dsn is set"
			}
		case "database.schema":
			if !strings.HasPrefix(c.Database.DSN, "postgres") {
				v.Note = "unused: PostgreSQL only"
			}
		case "engine.node":
			if v.Value == "" {
				v.Note = "hostname-pid-random"
			}
		case "redis.url":
			v.Value = RedactDSN(v.Value)
			if v.Value == "" {
				v.Note = "Redis gate off"
			}
		case "tracing.otlp_endpoint":
			if v.Value == "" {
				v.Note = "traces off"
			}
		}
		out = append(out, v)
	}
	for i, t := range c.Tokens {
		v := Value{
			Key:    fmt.Sprintf("tokens[%d]", i),
			Value:  fmt.Sprintf("role=%s token=<redacted, %d chars>", t.Role, len(t.Token)),
			Source: SourceFile,
		}
		switch {
		case t.From == fromKeelToken:
			v.Source, v.Env = SourceEnv, "KEEL_TOKEN"
		case t.TokenEnv != "":
			v.Note = "token from env " + t.TokenEnv
		}
		out = append(out, v)
	}
	if len(c.Tokens) == 0 {
		out = append(out, Value{Key: "tokens", Value: "none", Source: SourceDefault, Env: "KEEL_TOKEN", Note: "loopback only, requests not checked"})
	}
	worked := c.WorkedQueues()
	for _, name := range slices.Sorted(maps.Keys(c.Queues)) {
		key := "queues." + name + ".workers"
		v := Value{Key: key, Value: strconv.Itoa(c.Queues[name].Workers), Source: c.Source(key)}
		if _, ok := worked[name]; !ok {
			v.Note = "not worked: no type with a url uses it"
		}
		out = append(out, v)
		pkey := "queues." + name + ".prefetch"
		pv := Value{Key: pkey, Value: strconv.Itoa(c.Queues[name].Prefetch), Source: c.Source(pkey)}
		if c.Queues[name].Prefetch == 0 {
			pv.Note = "off"
		}
		out = append(out, pv)
		if q := c.Queues[name]; q.Concurrency > 0 || q.Rate > 0 || q.Burst > 0 {
			p := "queues." + name + "."
			for _, f := range [][2]string{{"concurrency", strconv.Itoa(q.Concurrency)},
				{"rate", strconv.FormatFloat(q.Rate, 'g', -1, 64)}, {"burst", strconv.Itoa(q.Burst)}} {
				out = append(out, Value{Key: p + f[0], Value: f[1], Source: c.Source(p + f[0])})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Types)) {
		out = append(out, c.typeValues(name, c.Types[name])...)
	}
	return append(out, c.sourceValues()...)
}

func (c *Config) typeValues(name string, t Type) []Value {
	p := "types." + name + "."
	val := func(field, value string) Value {
		return Value{Key: p + field, Value: value, Source: c.Source(p + field)}
	}
	url := val("url", t.URL)
	if !t.IsTarget() {
		url.Note = "enqueue-only: another process works it"
	}
	out := []Value{
		url,
		val("queue", t.Queue),
		val("priority", strconv.Itoa(t.Priority)),
		val("max_attempts", strconv.Itoa(t.MaxAttempts)),
		val("timeout", t.Timeout.String()),
		val("on_dead", t.OnDead),
	}
	if t.Concurrency > 0 || t.Rate > 0 || t.Burst > 0 {
		out = append(out, val("concurrency", strconv.Itoa(t.Concurrency)),
			val("rate", strconv.FormatFloat(t.Rate, 'g', -1, 64)), val("burst", strconv.Itoa(t.Burst)))
	}
	if r := t.Ramp; r != nil {
		steps := make([]string, len(r.Steps))
		for i, n := range r.Steps {
			steps[i] = strconv.Itoa(n)
		}
		out = append(out, Value{Key: p + "ramp", Source: SourceFile, Value: fmt.Sprintf("steps %s every %s max_failure_ratio %s min_attempts %d (0: default)",
			strings.Join(steps, ","), r.Every, strconv.FormatFloat(r.MaxFailureRatio, 'g', -1, 64), r.MinAttempts)})
	}
	if !t.IsTarget() {
		return out
	}
	out = append(out,
		val("connect_timeout", t.ConnectTimeout.String()),
		val("read_timeout", t.ReadTimeout.String()),
		val("max_result_bytes", strconv.FormatInt(t.MaxResultBytes, 10)),
		val("backoff_base", t.BackoffBase.String()),
		val("backoff_max", t.BackoffMax.String()),
		val("brake", brakeValue(t.Brake)),
	)
	for _, h := range slices.Sorted(maps.Keys(t.Headers)) {
		v := Value{Key: p + "headers." + h, Value: "<redacted>", Source: SourceFile}
		if env, ok := t.HeadersEnv[h]; ok {
			v.Note = "from env " + env
		}
		out = append(out, v)
	}
	return out
}

// brakeValue shows a type's brake in one line.
func brakeValue(b TypeBrake) string {
	if b.Off {
		return "off"
	}
	window, threshold, cooldown := "20", "0.5", "30s"
	if b.Window > 0 {
		window = strconv.Itoa(b.Window)
	}
	if b.Threshold > 0 {
		threshold = strconv.FormatFloat(b.Threshold, 'g', -1, 64)
	}
	if b.Cooldown > 0 {
		cooldown = b.Cooldown.String()
	}
	return "window " + window + ", threshold " + threshold + ", cooldown " + cooldown
}
