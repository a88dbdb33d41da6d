package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks with side-by-side baselines measured in the same run",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchCommitCmd(), newBenchSessionsCmd(), newBenchWorkflowCmd(), newBenchScaleCmd(), newBenchLocomoCmd(), newBenchContextCmd(), newBenchRetrievalCmd(), newBenchMemoryCmd())
	// A CPU profile of the whole measurement (baselines included) shows
	// where a target's time goes: `go tool pprof -top FILE`.
	var profile string
	cmd.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the benchmark to this file")
	for _, sub := range cmd.Commands() {
		run := sub.RunE
		sub.RunE = func(c *cobra.Command, args []string) (err error) {
			if profile == "" {
				return run(c, args)
			}
			f, err := os.Create(profile)
			if err != nil {
				return fmt.Errorf("cpu profile: %w", err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				_ = f.Close()
				return fmt.Errorf("cpu profile: %w", err)
			}
			defer func() {
				pprof.StopCPUProfile()
				if cerr := f.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("cpu profile: %w", cerr)
				}
			}()
			return run(c, args)
		}
	}
	return cmd
}

type benchCommitFlags struct {
	postgres    string
	duration    time.Duration
	warmup      time.Duration
	slice       time.Duration
	rounds      int
	concurrency []int
	asJSON      bool
	quiet       bool
	noHTTP      bool
	noSQLite    bool
	noDBOS      bool
	dbosBin     string
	dbosDir     string
	dbosSteps   int
}

func newBenchCommitCmd() *cobra.Command {
	var f benchCommitFlags
	cmd := &cobra.Command{
		Use:   "commit",
		Short: "Step commits per second: engine, HTTP and SQLite against their floors, and DBOS",
		Long: `Measure step commits per second at each concurrency (default 1 and 16), each
committer on its own run with its lease held, for:

  postgres floor    the same guarded UPDATE + INSERT as the store's commit, one
                    statement (one round trip) from a bare pgx pool
  postgres engine   run.Service over store/postgres
  postgres http     the Go client -> the HTTP server (in this process) -> PostgreSQL,
                    asking for the minimal answer (Prefer: return=minimal)
  sqlite floor      the same UPDATE + INSERT through the same SQLite driver
  sqlite engine     run.Service over store/sqlite (a temporary directory)
  dbos              DBOS Transact for Go, workflows of no-op steps (cmd/memento/internal/bench/dbospeer,
                    built with the go command from the source tree, or --dbos-bin)

Within a round, at each concurrency, the targets (DBOS too, in its own process
on request) take turns of --slice until each has run --duration, so that load
from elsewhere on the machine weighs on all of them alike. A turn counts what
completed within it. The median of the rounds is reported, with the ratios
engine/floor, http/floor, sqlite engine/sqlite floor and Memento/DBOS, each the
median of its per-round ratios. Everything runs in schemas and directories of its own that
are removed at the end. Progress goes to stderr, the report to stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchCommit(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.postgres, "postgres", "", "PostgreSQL URL (env "+envPostgresURL+")")
	fl.DurationVar(&f.duration, "duration", bench.DefaultDuration, "measured time of each target at each concurrency, per round")
	fl.DurationVar(&f.warmup, "warmup", 0, "unmeasured time before each measurement (default duration/10)")
	fl.DurationVar(&f.slice, "slice", bench.DefaultSlice, "targets take turns of this long within each measurement")
	fl.IntVar(&f.rounds, "rounds", bench.DefaultRounds, "rounds; the median is reported")
	fl.IntSliceVar(&f.concurrency, "concurrency", bench.DefaultConcurrency, "concurrent committers, each on its own run")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	fl.BoolVar(&f.noHTTP, "no-http", false, "leave out the HTTP target")
	fl.BoolVar(&f.noSQLite, "no-sqlite", false, "leave out the SQLite targets")
	fl.BoolVar(&f.noDBOS, "no-dbos", false, "leave out the DBOS peer")
	fl.StringVar(&f.dbosBin, "dbos-bin", "", "a built cmd/memento/internal/bench/dbospeer program (default: build it from the source tree)")
	fl.StringVar(&f.dbosDir, "dbos-dir", "", "the cmd/memento/internal/bench/dbospeer module directory (default: found above the working directory)")
	fl.IntVar(&f.dbosSteps, "dbos-steps", bench.DefaultPeerSteps, "no-op steps per DBOS workflow")
	return cmd
}

func runBenchCommit(cmd *cobra.Command, f benchCommitFlags) error {
	pg := flagOrEnv(cmd, "postgres", f.postgres, envPostgresURL, "")
	if pg == "" {
		return errors.New("bench commit: a PostgreSQL URL is required (--postgres or " + envPostgresURL + ")")
	}
	var progress io.Writer = cmd.ErrOrStderr()
	if f.quiet {
		progress = io.Discard
	}
	warmup := f.warmup
	if !cmd.Flags().Changed("warmup") {
		warmup = 0 // the package's default: duration/10
	} else if warmup == 0 {
		warmup = -1 // asked for none
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunCommit(ctx, bench.CommitConfig{
		PostgresURL: pg,
		Duration:    f.duration,
		Warmup:      warmup,
		Slice:       f.slice,
		Rounds:      f.rounds,
		Concurrency: f.concurrency,
		SkipHTTP:    f.noHTTP,
		SkipSQLite:  f.noSQLite,
		Peer:        bench.PeerConfig{Skip: f.noDBOS, Bin: f.dbosBin, Dir: f.dbosDir, Steps: f.dbosSteps},
		Progress:    progress,
	})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.asJSON {
		return rep.WriteJSON(out)
	}
	if !f.quiet {
		fmt.Fprintln(progress)
	}
	rep.WriteTable(out)
	return nil
}
