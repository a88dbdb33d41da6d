package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/server"
)

const (
	envMCPTenant = "MEMENTO_MCP_TENANT"
	envMCPUser   = "MEMENTO_MCP_USER"
)

// newMCPServer is the MCP server over an engine's services.
func newMCPServer(eng *memento.Engine, logger *slog.Logger) *mcp.Server {
	return mcp.New(mcp.Services{Runs: eng.Runs, Sessions: eng.Sessions, Memory: eng.Memory, Context: eng.Context, Retrieval: eng.Retrieval},
		mcp.Options{Version: buildVersion(), Classify: server.ClassifyError, OutcomeUnknown: server.OutcomeUnknown, Logger: logger})
}

func newMCPCmd() *cobra.Command {
	var f engineFlags
	var tenant, user string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the MCP tools on stdin/stdout, for an MCP client that starts Memento itself",
		Long: `Serve Memento's MCP tools over stdio: an MCP client (Claude Desktop, an IDE,
the MCP Inspector) starts this command and speaks JSON-RPC on its stdin and
stdout; logs go to stderr. Every tool acts as --tenant and --user: whoever
writes the client config binds the connection, never the model.

The backends are chosen as for serve (embedded SQLite in --data by default,
--postgres, --redis). The HTTP server serves the same tools at /mcp. Every
flag has an environment variable; a flag on the command line wins.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := mcp.Binding{
				Tenant: flagOrEnv(cmd, "tenant", tenant, envMCPTenant, tenant),
				User:   flagOrEnv(cmd, "user", user, envMCPUser, user),
			}
			if err := run.ValidID("tenant", b.Tenant); err != nil {
				return err
			}
			if err := run.ValidID("user", b.User); err != nil {
				return err
			}
			cfg, err := engineConfig(cmd, f)
			if err != nil {
				return err
			}
			logger, err := engineLogger(cmd, f)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			eng, err := memento.Open(ctx, cfg)
			if err != nil {
				return err
			}
			defer eng.Close()
			return newMCPServer(eng, logger).RunStdio(ctx, b)
		},
	}
	addEngineFlags(cmd, &f)
	cmd.Flags().StringVar(&tenant, "tenant", server.DefaultTenant, "tenant every tool acts in (env "+envMCPTenant+")")
	cmd.Flags().StringVar(&user, "user", server.DefaultUser, "user every tool acts as (env "+envMCPUser+")")
	return cmd
}
