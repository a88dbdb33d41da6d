package main

import (
	"errors"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
)

func newBenchScaleCmd() *cobra.Command {
	var (
		pg, dataDir string
		cfg         bench.ScaleConfig
		asJSON      bool
		quiet       bool
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Recovery poll, retention, commits, resume and storage at 10k to 1M runs",
		Long: `Load each size of runs (default 10k, 100k and 1M; 1 in 1000 active, half of those
running with a live lease and half suspended waiting for an approval that
expires in a day, the rest finished over the last 30 days with two events
each; beside them, in a tenant of their own, as many running runs with a free
lease as there are active runs) into a schema (--postgres) or file (--data)
of its own, dropped after, and measure them in interleaved rounds (each round
takes every size in turn, so that load from elsewhere weighs on all alike):

  poll       one whole recovery poll, every page, as the workflow engine makes it,
             of the healthy tenant (nothing is due: it returns nothing)
  due poll   the same of the tenant of free leases (all returned), also per
             returned run: those runs grow with the size
  retain     one retention batch of 500 finished runs
  commit/s   step commits per second at c=1 on a leased run, taken in 100 ms
             slices by the sizes in turn
  resume     resume verification of a suspended run with 10k events
  storage    bytes per event of a 1,000-step run with a 100 KB state (first size
             only), beside a full copy of the state per event

Each figure is the median of the rounds, printed beside its ratio to the
first size's; for the poll and commit/s also the paired ratio, the median
over rounds of each round's ratio (load that came and went between rounds
moves it less). --json adds every round's sample.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.PostgresURL = flagOrEnv(cmd, "postgres", pg, envPostgresURL, "")
			if !cmd.Flags().Changed("postgres") && dataDir != "" {
				cfg.PostgresURL = "" // --data alone measures SQLite only
			}
			cfg.DataDir = dataDir
			if cfg.PostgresURL == "" && cfg.DataDir == "" {
				return errors.New("bench scale: --postgres URL (or " + envPostgresURL + ") or --data DIR is required")
			}
			cfg.Progress = cmd.ErrOrStderr()
			if quiet {
				cfg.Progress = io.Discard
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			rep, err := bench.RunScale(ctx, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			rep.WriteTable(cmd.OutOrStdout())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&pg, "postgres", "", "PostgreSQL URL (env "+envPostgresURL+")")
	fl.StringVar(&dataDir, "data", "", "directory for the SQLite files (removed after)")
	fl.IntSliceVar(&cfg.Sizes, "sizes", bench.DefaultScaleSizes, "run counts to load, smallest first (the ratios are to the first)")
	fl.IntVar(&cfg.ActiveEvery, "active-every", 1000, "one run in this many is active")
	fl.IntVar(&cfg.Rounds, "rounds", 5, "interleaved rounds over the sizes; each figure is the median of the rounds")
	fl.IntVar(&cfg.Polls, "polls", 5, "recovery polls per size and round")
	fl.IntVar(&cfg.RetainBatches, "retain-batches", 2, "retention batches per size and round")
	fl.DurationVar(&cfg.CommitDuration, "commit-duration", 5*time.Second, "time commits are measured per size, over all rounds")
	fl.IntVar(&cfg.ResumeEvents, "resume-events", 10_000, "events of the resumed run")
	fl.IntVar(&cfg.StorageSteps, "storage-steps", 1000, "steps of the storage run")
	fl.IntVar(&cfg.StateBytes, "state-bytes", 100<<10, "state size of the storage run")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}
