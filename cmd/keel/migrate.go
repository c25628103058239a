package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/driver"
)

type migrateOptions struct {
	dsn    string
	schema string
}

func newMigrateCmd() *cobra.Command {
	var o migrateOptions
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply keel's schema migrations and report every version",
		Long: `migrate creates or upgrades keel's tables and prints each schema version,
saying which ones this run applied. It is safe to run often and from several
processes at once.

  keel migrate --dsn ./keel.db                                  SQLite file
  keel migrate --dsn postgres://user@host:5432/db --schema keel  PostgreSQL`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMigrate(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	cmd.Flags().StringVar(&o.dsn, "dsn", "", "database: a postgres:// or mysql:// URL, or a SQLite file path (env KEEL_DSN)")
	cmd.Flags().StringVar(&o.schema, "schema", "keel", "PostgreSQL schema for keel's tables")
	return cmd
}

func runMigrate(ctx context.Context, out io.Writer, o migrateOptions) error {
	if o.dsn == "" {
		o.dsn = os.Getenv("KEEL_DSN")
	}
	if o.dsn == "" {
		return errors.New("--dsn is required (a postgres:// or mysql:// URL, or a SQLite file path)")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	drv, where, err := openStore(ctx, o.dsn, o.schema)
	if err != nil {
		return err
	}
	defer drv.Close()
	m, ok := drv.(driver.Migrator)
	if !ok {
		return fmt.Errorf("%s: this driver does not report migrations", where)
	}
	rows, err := m.Migrations(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, where)
	// Open applies what is missing, so a version this run applied shows an
	// applied time after the run started.
	for _, r := range rows {
		note := ""
		if !r.AppliedAt.Before(start) {
			note = "  (applied now)"
		}
		fmt.Fprintf(out, "  %03d  %-28s  applied %s%s\n", r.Version, r.Name, r.AppliedAt.Format(time.RFC3339), note)
	}
	return nil
}
