package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
)

func newBenchWorkflowCmd() *cobra.Command {
	var (
		pg, dbosBin, dbosDir string
		duration, warmup     time.Duration
		rounds, steps        int
		concurrency          []int
		asJSON, quiet, noDB  bool
	)
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Workflow steps per second through the workflow SDK on PostgreSQL, beside DBOS",
		Long: `Measure whole workflows of no-op steps (default 10) through the workflow SDK on
PostgreSQL: each worker starts a run, drives it (one commit per step, lease
held) to completion, and starts the next. Reported as steps per second at
each concurrency (default 1 and 16), beside DBOS Transact for Go doing the
same in the same run (cmd/memento/internal/bench/dbospeer), with the ratio Memento/DBOS (goal 2x).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url := flagOrEnv(cmd, "postgres", pg, envPostgresURL, "")
			if url == "" {
				return errors.New("bench workflow: a PostgreSQL URL is required (--postgres or " + envPostgresURL + ")")
			}
			var progress io.Writer = cmd.ErrOrStderr()
			if quiet {
				progress = io.Discard
			}
			w := warmup
			if !cmd.Flags().Changed("warmup") {
				w = 0
			} else if w == 0 {
				w = -1
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			rep, err := bench.RunWorkflow(ctx, bench.WorkflowConfig{
				PostgresURL: url, Steps: steps, Duration: duration, Warmup: w, Rounds: rounds, Concurrency: concurrency,
				Peer: bench.PeerConfig{Skip: noDB, Bin: dbosBin, Dir: dbosDir}, Progress: progress,
			})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			rep.WriteTable(cmd.OutOrStdout())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&pg, "postgres", "", "PostgreSQL URL (env "+envPostgresURL+")")
	fl.DurationVar(&duration, "duration", bench.DefaultDuration, "measured time at each concurrency, per round")
	fl.DurationVar(&warmup, "warmup", 0, "unmeasured time before each measurement (default duration/10)")
	fl.IntVar(&rounds, "rounds", bench.DefaultRounds, "rounds; the median is reported")
	fl.IntVar(&steps, "steps", bench.DefaultPeerSteps, "no-op steps per workflow (both sides)")
	fl.IntSliceVar(&concurrency, "concurrency", bench.DefaultConcurrency, "concurrent workers")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	fl.BoolVar(&noDB, "no-dbos", false, "leave out the DBOS peer")
	fl.StringVar(&dbosBin, "dbos-bin", "", "a built cmd/memento/internal/bench/dbospeer program (default: build it from the source tree)")
	fl.StringVar(&dbosDir, "dbos-dir", "", "the cmd/memento/internal/bench/dbospeer module directory")
	return cmd
}
