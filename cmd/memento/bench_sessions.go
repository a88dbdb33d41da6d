package main

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
)

type benchSessionsFlags struct {
	redis       string
	duration    time.Duration
	warmup      time.Duration
	slice       time.Duration
	rounds      int
	concurrency []int
	noRedaction bool
	noCache     bool
	asJSON      bool
	quiet       bool
}

func newBenchSessionsCmd() *cobra.Command {
	var f benchSessionsFlags
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Session get, append and patch per second on Redis against raw go-redis",
		Long: `Measure session operations per second and their p50/p99 latency at each
concurrency (default 1 and 16), each client on its own session, through
session.Service on the Redis store (redaction on, as in production), and in
the same rounds the floor: raw go-redis commands moving the same payload:

  get     HMGET of the session record      vs  GET of the session as served
  append  the append+trim script           vs  RPUSH+LTRIM+EXPIRE+HSET in one pipeline
  patch   merge, compare-and-set script    vs  GET + SET of the state

A patch merges onto the state the store last saw of that session when it
is the If-Match revision (each client here patches its own session, so it
is), and reads the state first otherwise; --no-state-cache measures the
read-first path.

Within each measurement memento and its floor take turns of --slice, so
both see the same background load; medians of the rounds are reported with
the ratio memento/floor (goal 0.8 for append, 0.7 otherwise). Every key lives under a random prefix and is
deleted at the end. Progress goes to stderr, the report to stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchSessions(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.redis, "redis", "", "Redis URL (env "+envRedisURL+")")
	fl.DurationVar(&f.duration, "duration", 2*time.Second, "measured time of each target at each concurrency, per round")
	fl.DurationVar(&f.warmup, "warmup", 0, "unmeasured time before each measurement (default duration/10)")
	fl.DurationVar(&f.slice, "slice", bench.DefaultSessionSlice, "memento and its floor take turns of this length within each measurement")
	fl.IntVar(&f.rounds, "rounds", bench.DefaultRounds, "rounds; the median is reported")
	fl.IntSliceVar(&f.concurrency, "concurrency", bench.DefaultConcurrency, "concurrent clients, each on its own session")
	fl.BoolVar(&f.noRedaction, "no-redaction", false, "measure without the personal-data redactor")
	fl.BoolVar(&f.noCache, "no-state-cache", false, "every patch reads the state first (the store's state cache off)")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}

func runBenchSessions(cmd *cobra.Command, f benchSessionsFlags) error {
	url := flagOrEnv(cmd, "redis", f.redis, envRedisURL, "")
	if url == "" {
		return errors.New("bench sessions: a Redis URL is required (--redis or " + envRedisURL + ")")
	}
	var progress io.Writer = cmd.ErrOrStderr()
	if f.quiet {
		progress = io.Discard
	}
	warmup := f.warmup
	if !cmd.Flags().Changed("warmup") {
		warmup = 0
	} else if warmup == 0 {
		warmup = -1
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunSessions(ctx, bench.SessionsConfig{
		RedisURL: url, Duration: f.duration, Warmup: warmup, Slice: f.slice, Rounds: f.rounds,
		Concurrency: f.concurrency, NoRedaction: f.noRedaction, NoStateCache: f.noCache, Progress: progress,
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
