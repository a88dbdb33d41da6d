package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/memory/extract"
)

type benchMemoryFlags struct {
	backends       []string
	sizes          []int
	postgres       string
	embedder       string
	subjects       int
	oneSubject     int
	queries        int
	addSamples     int
	extractSamples int
	workers        int
	asJSON         bool
	quiet          bool
	cpuProfile     string
}

func newBenchMemoryCmd() *cobra.Command {
	var f benchMemoryFlags
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Long-term memory: search latency at 10k-1M items, ingestion rate, add and extract p95, against store baselines",
		Long: `Measure long-term memory on each backend, in a fresh store of its own
(a temporary SQLite directory, a PostgreSQL schema of its own), with the
offline hashing embedder and the rule-based extractor:

  ingest   --add-samples claims through memory.Service.Add one at a time
           (claims/s, p50/p95), then as many straight to the store's Insert
           (the baseline: what the store alone costs per claim)
  extract  memory.Service.Extract with apply of one user message ("I live in
           Lyon now."), interleaved with a Service.Add of one claim (the
           baseline); target p95 < 5 ms
  search   at each --sizes: one tenant of --subjects subjects, and separately
           one subject holding up to --one-subject items; Service.Search
           (hybrid, k 10) interleaved with the store's SearchText on the same
           subject and words (the baseline); target p95 < 20 ms at 100k

Items past the first 2×--add-samples are bulk-loaded with --workers writers
straight to the store, in transactions of 500 claims (memory.BatchInserter,
on sqlite and postgres), with exactly the claim and vector row Add writes
for a new key (bench.BulkInsert, tested against Add), skipping Add's two
reads, so the 1M case fits in a run; Add's own rate is the ingest figure.
The one-subject layout's first search is reported on its own: it loads the
subject's claims and vectors into the in-process index.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchMemory(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.backends, "backend", []string{bench.BackendSQLite, bench.BackendPostgres}, "backends: sqlite, postgres, memstore")
	fl.IntSliceVar(&f.sizes, "sizes", []int{10_000, 100_000, 1_000_000}, "item counts of the many-subject tenant")
	fl.StringVar(&f.postgres, "postgres", "", "PostgreSQL URL for the postgres backend (env "+envPostgresURL+")")
	fl.StringVar(&f.embedder, "embedder", "hash", "embedder: hash (offline hashing) or none (full text only)")
	fl.IntVar(&f.subjects, "subjects", 10_000, "subjects of the many-subject tenant")
	fl.IntVar(&f.oneSubject, "one-subject", 100_000, "items of the one-subject tenant, at most (negative: skip it)")
	_ = fl.SetAnnotation("one-subject", negativeOK, []string{"skip"})
	fl.IntVar(&f.queries, "queries", 200, "searches per figure")
	fl.IntVar(&f.addSamples, "add-samples", 2000, "claims through Service.Add (and as many through the store's Insert)")
	fl.IntVar(&f.extractSamples, "extract-samples", 300, "Extract calls")
	fl.IntVar(&f.workers, "workers", 0, "bulk-load writers (default 2 on sqlite, one commits while the other builds its batch; 1 on memstore; 4 on postgres)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof; -focus Service.Search for the searches) of the whole run to this file")
	fl.BoolVar(&f.asJSON, "json", false, "print the reports as one JSON object")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}

func runBenchMemory(cmd *cobra.Command, f benchMemoryFlags) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("bench memory: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("bench memory: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var emb memory.Embedder
	switch f.embedder {
	case "hash":
		emb = hashembed.New(0)
	case "none":
	default:
		return fmt.Errorf("bench memory: unknown embedder %q (hash or none)", f.embedder)
	}
	var reps []*bench.MemoryReport
	for _, b := range f.backends {
		st, closeStore, err := bench.OpenMemoryStore(ctx, b, flagOrEnv(cmd, "postgres", f.postgres, envPostgresURL, ""))
		if err != nil {
			return fmt.Errorf("bench memory: %w", err)
		}
		workers := f.workers
		if workers <= 0 {
			switch b {
			case bench.BackendPostgres:
				workers = 4
			case bench.BackendSQLite:
				workers = 2
			default:
				workers = 1
			}
		}
		cfg := bench.MemoryConfig{
			Backend: b, Store: st, Embedder: emb, Extractor: extract.Rules{}, Sizes: f.sizes,
			Subjects: f.subjects, OneSubject: f.oneSubject, Queries: f.queries,
			AddSamples: f.addSamples, ExtractSamples: f.extractSamples, Workers: workers,
			Progress: cmd.ErrOrStderr(),
		}
		if f.quiet {
			cfg.Progress = nil
		}
		rep, err := bench.RunMemory(ctx, cfg)
		closeStore()
		if err != nil {
			return fmt.Errorf("bench memory: %s: %w", b, err)
		}
		reps = append(reps, rep)
	}
	if f.asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"backends": reps})
	}
	for _, r := range reps {
		writeMemoryTable(cmd.OutOrStdout(), r)
	}
	return nil
}

func writeMemoryTable(w io.Writer, r *bench.MemoryReport) {
	fmt.Fprintf(w, "long-term memory on %s (embedder %s)\n", r.Backend, r.Embedder)
	in := r.Ingest
	fmt.Fprintf(w, "ingest: Service.Add %.0f claims/s, p50 %.2f ms, p95 %.2f ms; store Insert %.0f claims/s, p95 %.2f ms; add/insert p95 %.2fx; bulk load %d claims at %.0f/s (%d workers)\n",
		in.AddPerSec, in.AddP50MS, in.AddP95MS, in.InsertPerSec, in.InsertP95MS, in.AddOverInsert, in.BulkClaims, in.BulkPerSec, in.BulkWorkers)
	ex := r.Extract
	fmt.Fprintf(w, "add with offline extraction (%s, apply, one message): p50 %.2f ms, p95 %.2f ms; Add p95 %.2f ms; extract/add p95 %.2fx; target p95 < %.0f ms: %s\n",
		ex.Extractor, ex.P50MS, ex.P95MS, ex.AddP95MS, ex.OverAdd, r.Targets.ExtractTargetMS, yesNo(ex.MeetsTarget))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join([]string{"layout", "items", "per subject", "mode", "first ms", "p50 ms", "p95 ms", "text p50 ms", "text p95 ms", "p95/text", "approx"}, "\t")+"\t")
	for _, s := range r.Search {
		first := ""
		if s.FirstMS > 0 {
			first = fmt.Sprintf("%.0f", s.FirstMS)
		}
		fmt.Fprintln(tw, strings.Join([]string{s.Layout, fmt.Sprint(s.Items), fmt.Sprint(s.PerSubject), s.Mode, first,
			fmt.Sprintf("%.2f", s.P50MS), fmt.Sprintf("%.2f", s.P95MS), fmt.Sprintf("%.2f", s.TextP50MS), fmt.Sprintf("%.2f", s.TextP95MS),
			fmt.Sprintf("%.2fx", s.OverText), yesNo(s.Approximate)}, "\t")+"\t")
	}
	_ = tw.Flush()
	if r.Targets.SearchMet != nil {
		fmt.Fprintf(w, "search p95 at 100k items (worst layout) %.2f ms; target < %.0f ms: %s\n", r.Targets.SearchP95At100kMS, r.Targets.SearchTargetMS, yesNo(*r.Targets.SearchMet))
	}
	fmt.Fprintln(w)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
