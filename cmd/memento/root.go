package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mementohq/memento/client"
)

// Environment variables mirroring flags; a flag given on the command line wins.
const (
	envListen      = "MEMENTO_LISTEN"
	envData        = "MEMENTO_DATA"
	envPostgresURL = "MEMENTO_POSTGRES_URL"
	envRedisURL    = "MEMENTO_REDIS_URL"
	envAPIKeys     = "MEMENTO_API_KEYS"
	envMaxState    = "MEMENTO_MAX_STATE_BYTES"
	envLogFormat   = "MEMENTO_LOG_FORMAT"
	envLogLevel    = "MEMENTO_LOG_LEVEL"
	envRetention   = "MEMENTO_RETENTION"
	// envRetrievalTTL and envSnapshotRetention bound document content and
	// retrieval snapshots in time.
	envRetrievalTTL      = "MEMENTO_RETRIEVAL_TTL"
	envSnapshotRetention = "MEMENTO_SNAPSHOT_RETENTION"
	envReqTimeout        = "MEMENTO_REQUEST_TIMEOUT"
	envMaxInFlight       = "MEMENTO_MAX_IN_FLIGHT"
	// envPIIRedaction and envPIIKey configure the session redactor and its vault.
	envPIIRedaction = "MEMENTO_PII_REDACTION"
	envPIIKey       = "MEMENTO_PII_KEY"
	envOTLPEndpoint = "MEMENTO_OTLP_ENDPOINT"
	envMCPStateless = "MEMENTO_MCP_STATELESS"
	envURL          = "MEMENTO_URL"
	envAPIKey       = "MEMENTO_API_KEY"

	defaultServerURL = "http://127.0.0.1:7700"
)

// newRootCmd builds the command tree. Each domain adds its command group
// here, built in its own file (runs.go; sessions.go, demo.go, bench.go ...).
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "memento",
		Short:         "Memento: the state and memory engine for AI agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServeCmd(),
		newMCPCmd(),
		newRunsCmd(),
		newWorkflowsCmd(),
		newSessionsCmd(),
		newMemoryCmd(),
		newDocsCmd(),
		newContextCmd(),
		newVersionCmd(),
		newBenchCmd(),
		newDemoCmd(),
		newModelsCmd(),
		newMigrateCmd(),
	)
	// Cobra adds help and completion when it executes; added now, the walks
	// below give them the same argument errors as the rest.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	explainArgErrors(root)
	root.SetFlagErrorFunc(suggestFlag)
	root.PersistentPreRunE = refuseNegativeCounts
	root.Version = buildVersion()
	root.SetVersionTemplate(versionLine() + "\n")
	return root
}

// negativeOK annotates an integer flag for which a negative value means
// something (see refuseNegativeCounts).
const negativeOK = "memento-negative-ok"

// refuseNegativeCounts fails a command given a negative number or duration
// for a flag (--limit -1, --after -1, --ttl -1h): every count, seq, size and
// time span is at least zero, and a negative one was silently taken as the
// default.
func refuseNegativeCounts(cmd *cobra.Command, _ []string) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Value.Type() {
		case "int", "int8", "int16", "int32", "int64", "duration", "float32", "float64":
		default:
			return
		}
		if _, ok := f.Annotations[negativeOK]; !ok && strings.HasPrefix(f.Value.String(), "-") && err == nil {
			err = fmt.Errorf("--%s must not be negative, got %s", f.Name, f.Value.String())
		}
	})
	return err
}

// refuseUnknownSubcommands makes every command group fail on an argument
// it does not know, naming the nearest command. Cobra would print the
// group's help and exit 0, so a mistyped "memento runs get" looked like
// success, and it suggests only at the root. No group takes arguments of
// its own; one that runs itself (bench, workflows) keeps its RunE.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if !cmd.HasSubCommands() {
		return
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		hint := fmt.Sprintf("run '%s --help' for the list", c.CommandPath())
		if near := closestCommands(c, args[0]); len(near) > 0 {
			hint = fmt.Sprintf("did you mean '%s'? (%s)", strings.Join(near, "' or '"), hint)
		}
		return fmt.Errorf("unknown command %q for %q; %s", args[0], c.CommandPath(), hint)
	}
	if !cmd.Runnable() {
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
}

// clientFlags are the flags of every command group that talks to a server.
type clientFlags struct {
	server string
	apiKey string
	asJSON bool
}

// addClientFlags puts --server, --api-key and --json on a command group.
func addClientFlags(cmd *cobra.Command, f *clientFlags) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.server, "server", "", "server URL (env "+envURL+", default "+defaultServerURL+")")
	pf.StringVar(&f.apiKey, "api-key", "", "API key (env "+envAPIKey+")")
	pf.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
}

// client builds an API client from the flags, falling back to the environment.
func (f *clientFlags) client(cmd *cobra.Command) (*client.Client, error) {
	server := flagOrEnv(cmd, "server", f.server, envURL, defaultServerURL)
	key := flagOrEnv(cmd, "api-key", f.apiKey, envAPIKey, "")
	var opts []client.Option
	if key != "" {
		opts = append(opts, client.WithAPIKey(key))
	}
	return client.New(server, opts...)
}

// flagOrEnv resolves a setting: the flag if given, else the environment
// variable if set, else the default. Secrets never appear as flag defaults,
// so --help cannot print them.
func flagOrEnv(cmd *cobra.Command, flag, value, env, def string) string {
	if f := cmd.Flags().Lookup(flag); f != nil {
		noteEnv(f, env)
		if f.Changed {
			return value
		}
	}
	if v, ok := os.LookupEnv(env); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

// envAnnotation notes on a flag the environment variable flagOrEnv read it
// from, so a test can check that every flag whose help names a variable is
// resolved through it.
const envAnnotation = "memento-env"

func noteEnv(f *pflag.Flag, env string) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[envAnnotation] = []string{env}
}
