package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Options says where Load reads from.
type Options struct {
	// Path is the TOML file. "" means $KEEL_CONFIG, else ./keel.toml if it
	// exists, else no file.
	Path string
	// Environ is the environment in os.Environ's form. nil: none.
	Environ []string
	// Flags are command-line values; they override the file and the
	// environment.
	Flags []Flag
}

// Flag is one setting given on the command line.
type Flag struct {
	Name  string // as the user typed it, for messages: "--listen"
	Key   string // a Field's key: "listen"
	Value string
}

// Load reads the file, the environment and the flags, in that order of
// strength, fills defaults and validates. The error lists every problem,
// each naming the setting and the bad value.
func Load(o Options) (*Config, error) {
	env := environ(o.Environ)
	c := Defaults()
	c.Queues, c.Types = nil, nil
	var errs []error
	var md toml.MetaData

	path, required := o.Path, o.Path != ""
	if path == "" {
		path, required = env["KEEL_CONFIG"], env["KEEL_CONFIG"] != ""
	}
	if path == "" {
		path = DefaultPath
	}
	if _, err := os.Stat(path); err == nil || required {
		c.File = path
		var err error
		md, err = toml.DecodeFile(path, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, k := range md.Undecoded() {
			if len(k) > 2 && k[0] == "schedules" && k[1] == "payload" {
				continue // a schedule's payload is any value, read whole
			}
			errs = append(errs, fmt.Errorf("%s: unknown key %s", path, k))
		}
		for _, f := range fields {
			if md.IsDefined(strings.Split(f.Key, ".")...) {
				c.sources[f.Key] = SourceFile
			}
		}
	}
	c.fillEntries(md)

	errs = append(errs, c.applyEnv(env)...)
	for _, fl := range o.Flags {
		f, ok := lookupField(fl.Key)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown setting %q", fl.Name, fl.Key))
			continue
		}
		if err := f.set(c, fl.Value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fl.Name, err))
			continue
		}
		c.sources[f.Key] = SourceFlag
	}
	errs = append(errs, c.resolveSecrets(env)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.fillTypes(md)
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func environ(kv []string) map[string]string {
	env := make(map[string]string, len(kv))
	for _, e := range kv {
		if k, v, ok := strings.Cut(e, "="); ok {
			env[k] = v
		}
	}
	return env
}

// fillEntries gives the queues and the entries of [queues] and [types] the
// defaults the file left out.
func (c *Config) fillEntries(md toml.MetaData) {
	if c.Queues == nil {
		c.Queues = map[string]Queue{DefaultQueue: {Workers: defaultWorkers, Prefetch: defaultWorkers / 4}}
	} else {
		c.sources["queues"] = SourceFile
	}
	for name, q := range c.Queues {
		if md.IsDefined("queues", name, "workers") {
			c.sources["queues."+name+".workers"] = SourceFile
		} else {
			q.Workers = defaultWorkers
		}
		if md.IsDefined("queues", name, "prefetch") {
			c.sources["queues."+name+".prefetch"] = SourceFile
		} else {
			q.Prefetch = max(q.Workers, 0) / 4
		}
		for _, f := range []string{"concurrency", "rate", "burst"} {
			if md.IsDefined("queues", name, f) {
				c.sources["queues."+name+"."+f] = SourceFile
			}
		}
		c.Queues[name] = q
	}
	if c.Types == nil {
		c.Types = map[string]Type{}
	}
	for i := range c.Tokens {
		c.Tokens[i].From = "file"
	}
}

// fillTypes gives each type the defaults it left out, some of them taken
// from [engine]; it runs after the environment and flags changed [engine].
func (c *Config) fillTypes(md toml.MetaData) {
	for name, t := range c.Types {
		defined := func(field string) bool {
			if md.IsDefined("types", name, field) {
				c.sources["types."+name+"."+field] = SourceFile
				return true
			}
			return false
		}
		for _, f := range []string{"url", "headers", "headers_env", "priority", "on_dead", "brake", "concurrency", "rate", "burst", "ramp"} {
			defined(f)
		}
		if !defined("queue") {
			t.Queue = DefaultQueue
		}
		if !defined("max_attempts") {
			t.MaxAttempts = c.Engine.MaxAttempts
		}
		if !defined("timeout") {
			t.Timeout = c.Engine.Timeout
		}
		if t.IsTarget() {
			if !defined("connect_timeout") {
				t.ConnectTimeout = defaultConnectTimeout
			}
			if !defined("read_timeout") {
				t.ReadTimeout = defaultReadTimeout
			}
			if !defined("max_result_bytes") {
				t.MaxResultBytes = defaultMaxResultBytes
			}
			if !defined("backoff_base") {
				t.BackoffBase = c.Engine.BackoffBase
			}
			if !defined("backoff_max") {
				t.BackoffMax = max(c.Engine.BackoffMax, t.BackoffBase)
			}
		} else {
			// Marked as set so that validate can say they apply only to
			// types with a url.
			for _, f := range []string{"connect_timeout", "read_timeout", "max_result_bytes", "backoff_base", "backoff_max"} {
				defined(f)
			}
		}
		c.Types[name] = t
	}
}

// fromKeelToken is Token.From of the token KEEL_TOKEN adds.
const fromKeelToken = "env KEEL_TOKEN"

// applyEnv applies the KEEL_* variables; an empty one counts as unset.
func (c *Config) applyEnv(env map[string]string) []error {
	var errs []error
	known := map[string]bool{}
	for _, f := range fields {
		known[f.Env] = true
		raw := env[f.Env]
		if raw == "" {
			continue
		}
		if err := f.set(c, raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Env, err))
			continue
		}
		c.sources[f.Key] = SourceEnv
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		for _, p := range envPrefixes {
			if strings.HasPrefix(name, p) && !known[name] {
				errs = append(errs, fmt.Errorf("%s: unknown setting (see keel serve --help for the KEEL_* variables)", name))
			}
		}
	}
	if tok := env["KEEL_TOKEN"]; tok != "" {
		c.Tokens = append(c.Tokens, Token{Token: tok, Role: RoleAdmin, From: fromKeelToken})
		c.sources["tokens"] = SourceEnv
	} else if len(c.Tokens) > 0 {
		c.sources["tokens"] = SourceFile
	}
	return errs
}

// resolveSecrets reads token_env and headers_env from the environment.
func (c *Config) resolveSecrets(env map[string]string) []error {
	var errs []error
	for i := range c.Tokens {
		t := &c.Tokens[i]
		key := fmt.Sprintf("tokens[%d]", i)
		switch {
		case t.TokenEnv != "" && t.Token != "":
			errs = append(errs, fmt.Errorf("%s: set token or token_env, not both", key))
		case t.TokenEnv != "":
			v := env[t.TokenEnv]
			if v == "" {
				errs = append(errs, fmt.Errorf("%s.token_env: environment variable %s is not set", key, t.TokenEnv))
			}
			t.Token, t.From = v, "file, from env "+t.TokenEnv
		case t.Token == "":
			errs = append(errs, fmt.Errorf("%s: set token or token_env", key))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Types)) {
		t := c.Types[name]
		if len(t.HeadersEnv) == 0 {
			continue
		}
		headers := maps.Clone(t.Headers)
		if headers == nil {
			headers = map[string]string{}
		}
		for _, h := range slices.Sorted(maps.Keys(t.HeadersEnv)) {
			key := fmt.Sprintf("types.%s.headers_env.%s", name, h)
			v := env[t.HeadersEnv[h]]
			switch {
			case v == "":
				errs = append(errs, fmt.Errorf("%s: environment variable %s is not set", key, t.HeadersEnv[h]))
			case headers[h] != "":
				errs = append(errs, fmt.Errorf("%s: header %s is also in types.%s.headers", key, h, name))
			default:
				headers[h] = v
			}
		}
		t.Headers = headers
		c.Types[name] = t
	}
	for i := range c.Alerts.Webhooks {
		w := &c.Alerts.Webhooks[i]
		for _, h := range slices.Sorted(maps.Keys(w.HeadersEnv)) {
			key := fmt.Sprintf("alerts.webhooks[%d].headers_env.%s", i, h)
			v := env[w.HeadersEnv[h]]
			switch {
			case v == "":
				errs = append(errs, fmt.Errorf("%s: environment variable %s is not set", key, w.HeadersEnv[h]))
			case w.Headers[h] != "":
				errs = append(errs, fmt.Errorf("%s: header %s is also in alerts.webhooks[%d].headers", key, h, i))
			default:
				if w.Headers == nil {
					w.Headers = map[string]string{}
				}
				w.Headers[h] = v
			}
		}
	}
	return errs
}
