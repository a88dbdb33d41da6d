package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/server"
	"github.com/mementohq/memento/telemetry"
)

type serveFlags struct {
	engineFlags
	listen                      string
	apiKeys                     string
	retention                   string
	requestTimeout, maxInFlight string
	otlpEndpoint                string
	mcpStateless                bool
}

// engineFlags choose and tune the backends; serve and mcp share them.
type engineFlags struct {
	data, postgres, redis string
	maxState              string
	logFormat, logLevel   string
	piiRedaction          bool
	models                modelFlags
	// retrievalTTL and snapRetention bound documents' content and
	// retrieval snapshots in time.
	retrievalTTL, snapRetention string
}

// addEngineFlags registers the flags of engineFlags on cmd.
func addEngineFlags(cmd *cobra.Command, f *engineFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", memento.DefaultDataDir, "data directory of the embedded backend (env "+envData+")")
	fl.StringVar(&f.postgres, "postgres", "", "PostgreSQL URL for runs, and for sessions unless --redis (env "+envPostgresURL+")")
	fl.StringVar(&f.redis, "redis", "", "Redis URL for sessions, or a Redis Cluster as redis://h1:p1?addr=h2:p2&addr=h3:p3 (env "+envRedisURL+")")
	fl.StringVar(&f.maxState, "max-state-bytes", "", "largest run state accepted, in bytes (env "+envMaxState+", default 1048576)")
	fl.BoolVar(&f.piiRedaction, "pii-redaction", true, "replace e-mails, phones, cards and IBANs in sessions by vault references (env "+envPIIRedaction+"; the vault key comes from "+envPIIKey+", 64 hex digits, required with --postgres or --redis: openssl rand -hex 32)")
	addModelFlags(cmd, &f.models)
	fl.StringVar(&f.retrievalTTL, "retrieval-ttl", "", "serve a document's content only this long after it was last PUT (or confirmed by a PUT of the same version), e.g. 2160h; empty: no bound (env "+envRetrievalTTL+")")
	fl.StringVar(&f.snapRetention, "snapshot-retention", "", "keep retrieval snapshots (what a retrieval answered, texts included) this long, purged every hour by serve, e.g. 168h (env "+envSnapshotRetention+", default 720h)")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json (env "+envLogFormat+")")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error (env "+envLogLevel+")")
}

// engineConfig reads the engine flags (or their environment variables).
func engineConfig(cmd *cobra.Command, f engineFlags) (memento.Config, error) {
	cfg := memento.Config{
		DataDir:     flagOrEnv(cmd, "data", f.data, envData, f.data),
		PostgresURL: flagOrEnv(cmd, "postgres", f.postgres, envPostgresURL, ""),
		RedisURL:    flagOrEnv(cmd, "redis", f.redis, envRedisURL, ""),
	}
	if v := flagOrEnv(cmd, "pii-redaction", strconv.FormatBool(f.piiRedaction), envPIIRedaction, "true"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("pii redaction %q: want true or false", v)
		}
		cfg.PII.Disabled = !on
	}
	key, err := piiKeyFromEnv()
	if err != nil {
		return cfg, err
	}
	cfg.PII.Key = key
	if cfg.Memory, err = memoryOptions(cmd, f.models); err != nil {
		return cfg, err
	}
	if v := flagOrEnv(cmd, "max-state-bytes", f.maxState, envMaxState, ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("max state bytes %q: want a positive integer", v)
		}
		cfg.MaxStateBytes = n
	}
	for _, d := range []struct {
		flag, env, what string
		value           string
		into            *time.Duration
	}{
		{"retrieval-ttl", envRetrievalTTL, "retrieval TTL", f.retrievalTTL, &cfg.Retrieval.TTL},
		{"snapshot-retention", envSnapshotRetention, "snapshot retention", f.snapRetention, &cfg.Retrieval.SnapshotRetention},
	} {
		if v := flagOrEnv(cmd, d.flag, d.value, d.env, ""); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x <= 0 {
				return cfg, fmt.Errorf("%s %q: want a positive duration such as 720h", d.what, v)
			}
			*d.into = x
		}
	}
	return cfg, nil
}

// engineLogger reads the log flags.
func engineLogger(cmd *cobra.Command, f engineFlags) (*slog.Logger, error) {
	return newLogger(cmd,
		flagOrEnv(cmd, "log-format", f.logFormat, envLogFormat, f.logFormat),
		flagOrEnv(cmd, "log-level", f.logLevel, envLogLevel, f.logLevel))
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API server (embedded SQLite by default)",
		Long: `Run the HTTP API server.

By default runs live in an embedded SQLite database in --data; with --postgres
they live in PostgreSQL. Without API keys the server serves one tenant,
"default", and only listens on a loopback address. Every flag has an
environment variable; a flag on the command line wins.

SIGINT or SIGTERM stops accepting connections and drains in-flight requests.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7700", "address to listen on (env "+envListen+")")
	fl.StringVar(&f.apiKeys, "api-keys", "", `API keys "key=tenant[:role[:user]],..." with role reader, writer (default) or admin; a key with a user serves /mcp only, as that user (env `+envAPIKeys+`)`)
	addEngineFlags(cmd, &f.engineFlags)
	fl.StringVar(&f.retention, "retention", "", "delete completed, failed and cancelled runs (with their events, checkpoints and operations) this long after their last update, e.g. 720h; empty keeps them (env "+envRetention+")")
	fl.StringVar(&f.requestTimeout, "request-timeout", "", "longest a request may work, store calls included, e.g. 30s (env "+envReqTimeout+", default 30s)")
	fl.StringVar(&f.maxInFlight, "max-in-flight", "", "most API requests served at once; beyond it a request is answered 503 overloaded (env "+envMaxInFlight+", default 256)")
	fl.BoolVar(&f.mcpStateless, "mcp-stateless", false, "serve /mcp without MCP sessions, each request standing alone, so that a load balancer without session affinity may send any request to any instance (env "+envMCPStateless+")")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces: a span per request and per store call; empty turns tracing off (env "+envOTLPEndpoint+")")
	return cmd
}

func runServe(cmd *cobra.Command, f serveFlags) error {
	listen := flagOrEnv(cmd, "listen", f.listen, envListen, f.listen)
	cfg, err := engineConfig(cmd, f.engineFlags)
	if err != nil {
		return err
	}
	var retention time.Duration
	if v := flagOrEnv(cmd, "retention", f.retention, envRetention, ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("retention %q: want a positive duration such as 720h", v)
		}
		retention = d
	}
	var reqTimeout time.Duration
	if v := flagOrEnv(cmd, "request-timeout", f.requestTimeout, envReqTimeout, ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("request timeout %q: want a positive duration such as 30s", v)
		}
		reqTimeout = d
	}
	var maxInFlight int
	if v := flagOrEnv(cmd, "max-in-flight", f.maxInFlight, envMaxInFlight, ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("max in flight %q: want a positive integer", v)
		}
		maxInFlight = n
	}
	v := flagOrEnv(cmd, "mcp-stateless", strconv.FormatBool(f.mcpStateless), envMCPStateless, "false")
	mcpStateless, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("mcp stateless %q: want true or false", v)
	}
	logger, err := engineLogger(cmd, f.engineFlags)
	if err != nil {
		return err
	}
	keys := server.NewKeySet()
	if err := server.ParseAPIKeys(keys, flagOrEnv(cmd, "api-keys", f.apiKeys, envAPIKeys, "")); err != nil {
		return fmt.Errorf("api keys: %w", err)
	}
	// Refuse a public address before opening any database.
	if err := server.CheckListenAddr(listen, keys.Len() > 0); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tracing, err := telemetry.Start(ctx, telemetry.Config{Endpoint: flagOrEnv(cmd, "otlp-endpoint", f.otlpEndpoint, envOTLPEndpoint, "")})
	if err != nil {
		return err
	}
	if tracing != nil {
		cfg.Tracer = tracing.Tracer
		defer func() {
			// Flush what the last requests produced, bounded: a collector
			// that went away must not hold the shutdown.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := tracing.Shutdown(sctx); err != nil {
				logger.Warn("tracing", "err", err)
			}
		}()
	}
	eng, err := memento.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer eng.Close()
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory, Retrieval: eng.Retrieval, Context: eng.Context, Summaries: eng.Summaries, Ready: eng.Ready,
		Backend: string(eng.Backend()), MaxStateBytes: eng.Config().MaxStateBytes,
		RequestTimeout: reqTimeout, MaxInFlight: maxInFlight,
		Keys: keys, Logger: logger, Tracing: tracing, MCP: newMCPServer(eng, logger), MCPStateless: mcpStateless})
	if err != nil {
		return err
	}
	if cfg.PostgresURL == "" {
		logger.Info("embedded backend", "data", eng.Config().DataDir)
	}
	logger.Info("sessions", "backend", string(eng.SessionBackend()), "pii_redaction", !cfg.PII.Disabled, "vault_encrypted", eng.Vault.Encrypted())
	if retention > 0 {
		// Every instance may start it: the store lets one sweep at a time
		// and the others' passes return at once.
		retCtx, stopRetention := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			eng.Runs.RetainEvery(retCtx, retention, min(retention/10, time.Hour), func(n int, err error) {
				if err != nil {
					logger.Error("retention", "err", err)
				} else if n > 0 {
					logger.Info("retention", "deleted_runs", n, "older_than", retention.String())
				}
			})
		}()
		defer func() { stopRetention(); <-done }()
	}
	if eng.Retrieval != nil {
		// Every instance may run it: a pass deletes what is past the
		// retention, whatever another instance did before.
		purgeCtx, stopPurge := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			eng.Retrieval.PurgeSnapshotsEvery(purgeCtx, time.Hour, func(n int, err error) {
				if err != nil {
					logger.Error("snapshot retention", "err", err)
				} else if n > 0 {
					logger.Info("snapshot retention", "purged_snapshots", n)
				}
			})
		}()
		defer func() { stopPurge(); <-done }()
	}
	return srv.ListenAndServe(ctx, listen)
}

// piiKeyFromEnv reads the vault key from MEMENTO_PII_KEY (nil when unset).
func piiKeyFromEnv() ([]byte, error) {
	v := os.Getenv(envPIIKey)
	if v == "" {
		return nil, nil
	}
	key, err := hex.DecodeString(strings.TrimSpace(v))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%s: want 64 hex digits (an AES-256 key; make one with `openssl rand -hex 32`)", envPIIKey)
	}
	return key, nil
}

func newLogger(cmd *cobra.Command, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	// Logs never carry raw personal data, even when a value slips into a message.
	switch format {
	case "text":
		return slog.New(pii.NewLogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), opts), nil)), nil
	case "json":
		return slog.New(pii.NewLogHandler(slog.NewJSONHandler(cmd.ErrOrStderr(), opts), nil)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}
