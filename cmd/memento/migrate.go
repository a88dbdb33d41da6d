package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
)

func newMigrateCmd() *cobra.Command {
	var data, pg string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (as serve does at start) and print the schema version",
		Long: `Bring the database up to this version of Memento and exit: the embedded
SQLite file in --data by default, or PostgreSQL with --postgres. serve and
mcp apply the same migrations when they start; run this first to migrate
during a deployment instead, before new instances start. Migrations are
applied in one transaction each run, under a lock, so instances starting
together apply every file once. Redis (sessions) needs none.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			url := flagOrEnv(cmd, "postgres", pg, envPostgresURL, "")
			var (
				name    string
				version func(context.Context) (string, int, error)
			)
			if url != "" {
				db, err := postgres.Open(ctx, url)
				if err != nil {
					return err
				}
				defer db.Close()
				name, version = "postgres", db.SchemaVersion
			} else {
				db, err := sqlite.OpenDir(ctx, flagOrEnv(cmd, "data", data, envData, data))
				if err != nil {
					return err
				}
				defer db.Close()
				name, version = "sqlite "+db.Path(), db.SchemaVersion
			}
			latest, n, err := version(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: schema at %s (%s applied)\n", name, strings.TrimSuffix(latest, ".sql"), plural(n, "migration", "migrations"))
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", memento.DefaultDataDir, "data directory of the embedded backend (env "+envData+")")
	cmd.Flags().StringVar(&pg, "postgres", "", "PostgreSQL URL (env "+envPostgresURL+")")
	return cmd
}
