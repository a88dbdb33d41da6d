package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
)

const dbosModule = "github.com/dbos-inc/dbos-transact-golang"

// Result is one measurement at one concurrency.
type Result struct {
	Concurrency int     `json:"concurrency"`
	Steps       int64   `json:"steps"`
	Seconds     float64 `json:"seconds"`
	StepsPerSec float64 `json:"steps_per_sec"`
}

// Report is what the one-shot mode prints on stdout.
type Report struct {
	Peer             string   `json:"peer"`
	Version          string   `json:"version"`
	StepsPerWorkflow int      `json:"steps_per_workflow"`
	Schema           string   `json:"schema"`
	Results          []Result `json:"results"`
}

type options struct {
	url         string
	schema      string
	duration    time.Duration
	warmup      time.Duration
	steps       int
	concurrency []int
	keep        bool
	serve       bool
}

func main() {
	var o options
	var conc string
	flag.StringVar(&o.url, "postgres", envOr("MEMENTO_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL (DBOS's system database)")
	flag.StringVar(&o.schema, "schema", "", "schema for DBOS's system tables (default: a new dbos_bench_<hex>; dropped at exit unless -keep)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per concurrency")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured time per concurrency before measuring")
	flag.IntVar(&o.steps, "steps", 10, "no-op steps per workflow")
	flag.StringVar(&conc, "concurrency", "1,16", "comma-separated numbers of concurrent workflow runners")
	flag.BoolVar(&o.keep, "keep", false, "keep the schema and its tables at exit")
	flag.BoolVar(&o.serve, "serve", false, `measure on request: print a "ready" JSON line, then answer each stdin line "measure C DURATION" with a JSON result line; exit at end of input`)
	flag.Parse()
	for _, s := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "dbospeer: bad -concurrency %q\n", conc)
			os.Exit(2)
		}
		o.concurrency = append(o.concurrency, n)
	}
	if o.schema == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.schema = "dbos_bench_" + hex.EncodeToString(b[:])
	}
	if o.steps < 1 {
		fmt.Fprintln(os.Stderr, "dbospeer: -steps must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "dbospeer: %v\n", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// counting is the window in which recorded steps are counted: the steps
// of every workflow, whichever goroutine runs it, land in one counter.
var counting struct {
	until atomic.Int64 // unix nanoseconds; steps recorded before it count
	steps atomic.Int64
}

func noop(context.Context) (int, error) { return 0, nil }

// workflow runs its input's number of no-op steps. A step counts once
// RunAsStep has returned, that is once DBOS has checkpointed its outcome.
func workflow(ctx dbos.Context, steps int) (int, error) {
	for i := 0; i < steps; i++ {
		if _, err := dbos.RunAsStep(ctx, noop, dbos.WithStepName("noop")); err != nil {
			return i, fmt.Errorf("step %d: %w", i, err)
		}
		if time.Now().UnixNano() < counting.until.Load() {
			counting.steps.Add(1)
		}
	}
	return steps, nil
}

func run(ctx context.Context, o options, in io.Reader, out io.Writer) (err error) {
	if !o.keep {
		// Drop what DBOS created even if it failed half way.
		defer func() {
			if derr := dropSchema(context.WithoutCancel(ctx), o.url, o.schema); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		AppName:        "memento-bench-dbospeer",
		DatabaseURL:    o.url,
		DatabaseSchema: o.schema,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return fmt.Errorf("open DBOS on %s: %w", redact(o.url), err)
	}
	defer dbos.Shutdown(dctx, 10*time.Second)
	dbos.RegisterWorkflow(dctx, workflow)
	if err := dbos.Launch(dctx); err != nil {
		return fmt.Errorf("launch DBOS: %w", err)
	}
	enc := json.NewEncoder(out)
	if o.serve {
		return serve(ctx, dctx, o, in, enc)
	}
	rep := Report{Peer: dbosModule, Version: dbosVersion(), StepsPerWorkflow: o.steps, Schema: o.schema}
	for _, c := range o.concurrency {
		if o.warmup > 0 {
			if _, err := measure(dctx, c, o.steps, o.warmup); err != nil {
				return err
			}
		}
		r, err := measure(dctx, c, o.steps, o.duration)
		if err != nil {
			return err
		}
		rep.Results = append(rep.Results, r)
	}
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// serve answers measurement requests one line at a time, so that a caller
// can interleave DBOS with its own measurements in short turns.
func serve(ctx context.Context, dctx dbos.Context, o options, in io.Reader, enc *json.Encoder) error {
	ready := map[string]any{"ready": true, "peer": dbosModule, "version": dbosVersion(), "steps_per_workflow": o.steps, "schema": o.schema}
	if err := enc.Encode(ready); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 || f[0] != "measure" {
			return fmt.Errorf("bad request %q: want \"measure C DURATION\"", sc.Text())
		}
		c, err := strconv.Atoi(f[1])
		if err != nil || c < 1 {
			return fmt.Errorf("bad concurrency in %q", sc.Text())
		}
		d, err := time.ParseDuration(f[2])
		if err != nil || d <= 0 {
			return fmt.Errorf("bad duration in %q", sc.Text())
		}
		r, err := measure(dctx, c, o.steps, d)
		if err != nil {
			return err
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// measure runs c workers, each starting workflows one after another and
// waiting for each, for d; it counts the steps recorded within d and then
// waits for the workflows in flight to finish (uncounted).
func measure(dctx dbos.Context, c, steps int, d time.Duration) (Result, error) {
	var firstErr error
	var once sync.Once
	start := time.Now()
	until := start.Add(d)
	counting.steps.Store(0)
	counting.until.Store(until.UnixNano())
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Go(func() {
			for time.Now().Before(until) {
				h, err := dbos.RunWorkflow(dctx, workflow, steps)
				if err == nil {
					_, err = h.GetResult()
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return Result{}, fmt.Errorf("run workflow at concurrency %d: %w", c, firstErr)
	}
	n := counting.steps.Load()
	return Result{Concurrency: c, Steps: n, Seconds: d.Seconds(), StepsPerSec: float64(n) / d.Seconds()}, nil
}

func dropSchema(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to drop schema %s: %w", schema, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

func dbosVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == dbosModule {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// redact hides a password in a URL for error messages.
func redact(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "@"); j >= 0 {
			cred := u[i+3 : i+3+j]
			if k := strings.Index(cred, ":"); k >= 0 {
				return u[:i+3] + cred[:k] + ":***" + u[i+3+j:]
			}
		}
	}
	return u
}
