package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/examples/refund"
	"github.com/mementohq/memento/run"
)

func newDemoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Demonstrations: a fake payments API, the crash-safe refund workflow, the GiftGenius agent",
	}
	cmd.AddCommand(newDemoPaymentsCmd(), newDemoRefundCmd(), newDemoGiftGeniusCmd())
	return cmd
}

func newDemoPaymentsCmd() *cobra.Command {
	var listen, ledger string
	var nonAuth bool
	cmd := &cobra.Command{
		Use:   "payments",
		Short: "Run a fake payments API with idempotency keys and a durable ledger file",
		Long: `Run a fake payments API: POST /refunds (Idempotency-Key header) applies a
refund once per key and fsyncs it to the ledger file before answering;
GET /refunds lists every applied refund; GET /refunds/{key} looks one up by
key (404 when not applied, 503 when the lookup is switched to
non-authoritative with POST /admin/authoritative {"authoritative": false} or
--non-authoritative); GET /orders/{id} serves demo orders ("order-0001"...).
The first line on stdout is "payments listening on http://ADDR".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ledger == "" {
				return errors.New("--ledger FILE is required")
			}
			p, err := refund.OpenPayments(ledger)
			if err != nil {
				return err
			}
			defer p.Close()
			p.SetAuthoritative(!nonAuth)
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen %s: %w", listen, err)
			}
			srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "payments listening on http://%s\n", ln.Addr())
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7800", "address to listen on (port 0 picks a free one)")
	cmd.Flags().StringVar(&ledger, "ledger", "", "ledger file (JSON lines, fsynced)")
	cmd.Flags().BoolVar(&nonAuth, "non-authoritative", false, "start with the lookup by key answering 503")
	return cmd
}

func newDemoRefundCmd() *cobra.Command {
	var cfg refund.DemoConfig
	var data, pg, logLevel string
	cmd := &cobra.Command{
		Use:   "refund",
		Short: "Drive N refund runs (lookup, dialog, memory, policy, decide, approve, refund, verify) to an end; restartable",
		Long: `Create one refund run per order (order-0001 ... order-N), idempotently, and
serve them until every run is completed, failed or suspended for an operator.
Each order comes with a long customer dialog (a session): the run reads its
older part through a summary it verifies and the recent part raw, keeps a
refund-method preference the customer confirmed in long-term memory (read
back on the customer's later orders), and retrieves the refund policy as
agent:refund-bot, readable by group:support only, with its provenance.
Killed at any instant and started again, it continues every unfinished run;
each refund is applied at most once. Approvals are decided by a policy
(approve up to --approval-limit cents, reject above) unless
--manual-approvals leaves them to a person (POST /v1/approvals/{id}/decision
on a server over the same store). The last line printed is a JSON summary
{"runs_by_status": {...}, "refunds_applied": {...}, ...}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.PaymentsURL == "" {
				return errors.New("--payments URL is required")
			}
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("log level %q: %w", logLevel, err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lv}))
			cfg.Hooks = crashPoints(cmd.ErrOrStderr())
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			reg := run.NewRegistry()
			if err := refund.RegisterSchemas(reg); err != nil {
				return err
			}
			key, err := piiKeyFromEnv()
			if err != nil {
				return err
			}
			pgURL := flagOrEnv(cmd, "postgres", pg, envPostgresURL, "")
			eng, err := memento.Open(ctx, memento.Config{
				DataDir:     flagOrEnv(cmd, "data", data, envData, data),
				PostgresURL: pgURL,
				Registry:    reg,
				// The demo's sessions are the customer dialogs it makes up,
				// which hold no personal data: on PostgreSQL without a key it
				// turns redaction (and so the vault, which would need the
				// key) off.
				PII: memento.PIIConfig{Key: key, Disabled: key == nil && pgURL != ""},
				// Summaries sized and counted for the workflow's own (offline) model.
				Compaction: refund.CompactionOptions(),
			})
			if err != nil {
				return err
			}
			defer eng.Close()
			svc := refund.Services{Runs: eng.Runs, Sessions: eng.Sessions, Summaries: eng.Summaries, Memory: eng.Memory, Retrieval: eng.Retrieval}
			sum, err := refund.RunDemo(ctx, svc, eng.Ops, cfg)
			if err != nil {
				return err
			}
			b, _ := json.Marshal(sum)
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.PaymentsURL, "payments", "", "base URL of the payments API (memento demo payments)")
	fl.IntVar(&cfg.Orders, "orders", 10, "number of orders to refund")
	fl.StringVar(&data, "data", memento.DefaultDataDir, "data directory of the embedded backend (env "+envData+")")
	fl.StringVar(&pg, "postgres", "", "PostgreSQL URL (env "+envPostgresURL+")")
	fl.BoolVar(&cfg.ManualApprovals, "manual-approvals", false, "leave approvals to a person via the HTTP API")
	fl.Int64Var(&cfg.ApprovalLimit, "approval-limit", 15000, "policy: approve refunds up to this many cents")
	fl.DurationVar(&cfg.ApprovalTTL, "approval-ttl", time.Hour, "how long an approval stays usable")
	fl.IntVar(&cfg.Workers, "workers", 4, "runs driven at once")
	fl.DurationVar(&cfg.LeaseTTL, "lease-ttl", 2*time.Second, "lease duration; a killed worker's runs are picked up after it")
	fl.DurationVar(&cfg.Poll, "poll", 100*time.Millisecond, "how often to look for runs to pick up")
	fl.StringVar(&cfg.Tenant, "tenant", "default", "tenant of the runs")
	fl.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	return cmd
}
