package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/cmd/keel/internal/config"
)

// configFlags are the flags of keel serve and keel config check that
// choose and override the configuration.
type configFlags struct {
	path                    string
	listen, dsn, db, schema string
	logLevel, logFormat     string
	set                     []string
}

func (c *configFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&c.path, "config", "", "configuration file (env KEEL_CONFIG; default ./keel.toml when it exists)")
	fs.StringVar(&c.listen, "listen", "", "HTTP API address, host:port (default 127.0.0.1:7400)")
	fs.StringVar(&c.dsn, "dsn", "", "database: a postgres:// or mysql:// URL; empty for SQLite at --db")
	fs.StringVar(&c.db, "db", "", "SQLite file, used without --dsn (default ./keel.db)")
	fs.StringVar(&c.schema, "schema", "", "PostgreSQL schema for keel's tables (default keel)")
	fs.StringVar(&c.logLevel, "log-level", "", "debug, info, warn or error (default info)")
	fs.StringVar(&c.logFormat, "log-format", "", "text or json (default text)")
	fs.StringArrayVar(&c.set, "set", nil, "override any scalar setting: --set engine.timeout=2m (repeatable)")
}

// load reads the configuration with the flags the user gave.
func (c *configFlags) load(cmd *cobra.Command) (*config.Config, error) {
	var flags []config.Flag
	for _, f := range []struct{ name, key, value string }{
		{"listen", "listen", c.listen}, {"dsn", "database.dsn", c.dsn}, {"db", "database.db", c.db},
		{"schema", "database.schema", c.schema}, {"log-level", "log.level", c.logLevel}, {"log-format", "log.format", c.logFormat},
	} {
		if cmd.Flags().Changed(f.name) {
			flags = append(flags, config.Flag{Name: "--" + f.name, Key: f.key, Value: f.value})
		}
	}
	for _, s := range c.set {
		key, value, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--set %q: want key=value, such as engine.timeout=2m", s)
		}
		flags = append(flags, config.Flag{Name: "--set " + key, Key: strings.TrimSpace(key), Value: value})
	}
	cfg, err := config.Load(config.Options{Path: c.path, Environ: os.Environ(), Flags: flags})
	if err != nil {
		return nil, fmt.Errorf("configuration:\n%w", indentErr(err))
	}
	if _, err := buildTargets(cfg); err != nil {
		return nil, fmt.Errorf("configuration:\n%w", indentErr(err))
	}
	return cfg, nil
}

// indentErr indents each line of a (joined) error for a readable list.
func indentErr(err error) error {
	return fmt.Errorf("  %s", strings.ReplaceAll(err.Error(), "\n", "\n  "))
}

// envHelp lists the environment variables of the configuration.
func envHelp() string {
	var b strings.Builder
	b.WriteString("Environment (overrides the file; flags override both):\n")
	b.WriteString("  KEEL_CONFIG                      the configuration file\n")
	b.WriteString("  KEEL_TOKEN                       adds one admin token\n")
	for _, f := range config.Fields() {
		fmt.Fprintf(&b, "  %-32s %s\n", f.Env, f.Key)
	}
	return b.String()
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check keel serve's configuration, or print an example keel.toml",
	}
	var (
		c      configFlags
		asJSON bool
	)
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and print every effective value with its source",
		Long: `check reads the configuration exactly as keel serve would (file, then KEEL_*
environment, then flags), validates it and prints every effective value with
where it came from: default, file, env or flag. Secrets are redacted. It exits
non-zero, listing every problem, when the configuration is invalid.

` + envHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.load(cmd)
			if err != nil {
				return err
			}
			return printConfig(cmd.OutOrStdout(), cfg, asJSON)
		},
	}
	c.register(check)
	check.Flags().BoolVar(&asJSON, "json", false, "print the values as JSON")
	example := &cobra.Command{
		Use:   "example",
		Short: "Print a keel.toml with every setting at its default, commented",
		Long:  "example prints a keel.toml with every setting at its default and a comment on each:\n\n  keel config example > keel.toml",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), config.Example)
			return err
		},
	}
	cmd.AddCommand(check, example)
	return cmd
}

func printConfig(out io.Writer, cfg *config.Config, asJSON bool) error {
	if asJSON {
		return printJSON(out, struct {
			File     string         `json:"file"`
			Values   []config.Value `json:"values"`
			Warnings []string       `json:"warnings"`
		}{cfg.File, cfg.Values(), append([]string{}, cfg.Warnings...)})
	}
	file := cfg.File
	if file == "" {
		file = "none (defaults and environment only)"
	}
	fmt.Fprintf(out, "file: %s\n\n", file)
	tw := newTable(out)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tNOTE")
	for _, v := range cfg.Values() {
		value := v.Value
		if value == "" {
			value = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Key, value, v.Source, v.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	fmt.Fprintln(out, "configuration OK")
	return nil
}
