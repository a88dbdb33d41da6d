package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
)

type benchRetrievalFlags struct {
	chunks     []int
	principals int
	groups     int
	queries    int
	postgres   string
	data       string
	asJSON     bool
	cpuProfile string
	reuse      bool
}

func newBenchRetrievalCmd() *cobra.Command {
	var f benchRetrievalFlags
	cmd := &cobra.Command{
		Use:   "retrieval",
		Short: "Retrieve p50/p95 with ACL filtering, against an open ACL over the same chunks, and ingestion rate",
		Long: `Index synthetic documents (about 10 chunks of 200 tokens each; Zipf-distributed words) into two tenants of
the same store: one whose documents carry random ACLs over --principals
users and --groups groups (each user in a few groups), and one whose
documents are readable by the whole tenant (the baseline: the same text, the
same queries, an ACL that filters nothing). Then run --queries hybrid
retrievals in each, the two tenants taking turns query by query, and report
p50/p95 and the filtered/open ratios, the process CPU time per retrieval,
the first retrieval (which loads the tenant's in-process index), and the
ingestion rate (chunk + embed + index). Embedded SQLite in a temporary
directory by default; --postgres adds PostgreSQL. --reuse keeps the tenants
(named after the sizes) in --data or --postgres and measures them again on
a later run without ingesting.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchRetrieval(cmd, f) },
	}
	fl := cmd.Flags()
	fl.IntSliceVar(&f.chunks, "chunks", []int{10000, 100000}, "chunk counts to measure at")
	fl.IntVar(&f.principals, "principals", 1000, "users")
	fl.IntVar(&f.groups, "groups", 100, "groups")
	fl.IntVar(&f.queries, "queries", 200, "retrievals per tenant and size")
	fl.StringVar(&f.postgres, "postgres", "", "also measure on this PostgreSQL (a scratch database: tenants are random)")
	fl.StringVar(&f.data, "data", "", "SQLite directory (default: a temporary one)")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fl.BoolVar(&f.reuse, "reuse", false, "name the tenants after the sizes and keep them, and reuse ones a previous run left in --data or --postgres (no ingestion rate then)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to this file")
	return cmd
}

type benchRetrievalRow struct {
	Backend      string  `json:"backend"`
	Chunks       int     `json:"chunks"`
	IngestPerSec float64 `json:"ingest_chunks_per_sec"`
	ACLp50ms     float64 `json:"acl_p50_ms"`
	ACLp95ms     float64 `json:"acl_p95_ms"`
	Openp50ms    float64 `json:"open_p50_ms"`
	Openp95ms    float64 `json:"open_p95_ms"`
	ACLFirstms   float64 `json:"acl_first_ms"`
	OpenFirstms  float64 `json:"open_first_ms"`
	ACLCPUms     float64 `json:"acl_cpu_ms"`
	OpenCPUms    float64 `json:"open_cpu_ms"`
	ACLHits      float64 `json:"acl_mean_hits"`
	OpenHits     float64 `json:"open_mean_hits"`
}

var benchWords = strings.Fields(`refund invoice payment order shipment delivery carrier customer account balance
	ledger audit policy contract renewal discount warehouse inventory supplier incident outage escalation runbook
	deploy rollback database replica backup restore latency throughput queue worker schedule holiday payroll
	salary benefits onboarding laptop access badge security review approval budget forecast quarter revenue`)

// benchText is words drawn from a Zipf vocabulary of 20,000 made-up terms
// (as a real corpus, most words are rare) mixed with common domain words.
func benchText(rng *rand.Rand, z *rand.Zipf, words int) string {
	var b strings.Builder
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if rng.IntN(4) == 0 {
			b.WriteString(benchWords[rng.IntN(len(benchWords))])
		} else {
			fmt.Fprintf(&b, "t%dx", z.Uint64())
		}
	}
	return b.String()
}

func runBenchRetrieval(cmd *cobra.Command, f benchRetrievalFlags) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	type backend struct {
		name  string
		store retrieval.Store
	}
	var backends []backend
	dir := f.data
	if dir == "" {
		d, err := os.MkdirTemp("", "memento-bench-retrieval-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	lite, err := sqlite.OpenDir(ctx, dir)
	if err != nil {
		return err
	}
	defer lite.Close()
	backends = append(backends, backend{"sqlite", lite.Retrieval()})
	if f.postgres != "" {
		pg, err := postgres.Open(ctx, f.postgres)
		if err != nil {
			return err
		}
		defer pg.Close()
		backends = append(backends, backend{"postgres", pg.Retrieval()})
	}
	var rows []benchRetrievalRow
	for _, b := range backends {
		for _, n := range f.chunks {
			row, err := benchRetrievalOne(ctx, b.store, n, f, func(s string) { fmt.Fprintf(cmd.ErrOrStderr(), "%s %d: %s\n", b.name, n, s) })
			if err != nil {
				return fmt.Errorf("%s at %d chunks: %w", b.name, n, err)
			}
			row.Backend = b.name
			rows = append(rows, row)
		}
	}
	if f.asJSON {
		return printJSON(out, rows)
	}
	t := newTable(out, "BACKEND", "CHUNKS", "INGEST CHUNKS/S", "ACL P50 MS", "ACL P95 MS", "OPEN P50 MS", "OPEN P95 MS",
		"P50 ACL/OPEN", "P95 ACL/OPEN", "CPU MS/Q ACL/OPEN", "FIRST MS ACL/OPEN", "HITS ACL/OPEN")
	for _, r := range rows {
		ingest := "reused"
		if r.IngestPerSec > 0 {
			ingest = fmt.Sprintf("%.0f", r.IngestPerSec)
		}
		t.row(r.Backend, fmt.Sprint(r.Chunks), ingest, fmt.Sprintf("%.2f", r.ACLp50ms), fmt.Sprintf("%.2f", r.ACLp95ms),
			fmt.Sprintf("%.2f", r.Openp50ms), fmt.Sprintf("%.2f", r.Openp95ms), fmt.Sprintf("%.2f", r.ACLp50ms/r.Openp50ms),
			fmt.Sprintf("%.2f", r.ACLp95ms/r.Openp95ms), fmt.Sprintf("%.2f/%.2f", r.ACLCPUms, r.OpenCPUms),
			fmt.Sprintf("%.0f/%.0f", r.ACLFirstms, r.OpenFirstms),
			fmt.Sprintf("%.1f/%.1f", r.ACLHits, r.OpenHits))
	}
	return t.flush()
}

func benchRetrievalOne(ctx context.Context, st retrieval.Store, chunks int, f benchRetrievalFlags, progress func(string)) (benchRetrievalRow, error) {
	rng := rand.New(rand.NewPCG(1, uint64(chunks)))
	zipf := rand.NewZipf(rng, 1.1, 1, 20000)
	aclTenant, openTenant := fmt.Sprintf("bench-acl-%d", time.Now().UnixNano()), fmt.Sprintf("bench-open-%d", time.Now().UnixNano())
	if f.reuse {
		aclTenant = fmt.Sprintf("bench-acl-%d-%d-%d", chunks, f.principals, f.groups)
		openTenant = fmt.Sprintf("bench-open-%d-%d-%d", chunks, f.principals, f.groups)
	}
	svc := retrieval.NewService(st, retrieval.Options{Embedder: hashembed.New(hashembed.DefaultDim)})
	user := func(i int) string { return fmt.Sprintf("user:u%d", i) }
	const perDoc = 10
	docs := max(1, chunks/perDoc)
	row := benchRetrievalRow{}
	reused := false
	if f.reuse {
		_, errA := svc.Get(ctx, aclTenant, fmt.Sprintf("d%d", docs-1))
		_, errO := svc.Get(ctx, openTenant, fmt.Sprintf("d%d", docs-1))
		reused = errA == nil && errO == nil
	}
	if reused {
		for d := range docs {
			doc, err := svc.Get(ctx, openTenant, fmt.Sprintf("d%d", d))
			if err != nil {
				return row, fmt.Errorf("reuse %s: %w", openTenant, err)
			}
			row.Chunks += doc.Chunks
		}
		progress(fmt.Sprintf("reusing %d documents (%d chunks) per tenant", docs, row.Chunks))
	} else {
		for u := range f.principals {
			for range 1 + rng.IntN(3) {
				if _, err := svc.SetMember(ctx, aclTenant, fmt.Sprintf("g%d", rng.IntN(f.groups)), user(u), true); err != nil {
					return row, err
				}
			}
		}
		// A made-up word is about 2.5 tokens, a common one 1: about 75 words
		// make the 160 new tokens of each further chunk.
		words := perDoc * 75
		start := time.Now()
		written := 0
		for d := range docs {
			content := benchText(rng, zipf, words)
			var acl []string
			for range 1 + rng.IntN(3) {
				if rng.IntN(2) == 0 {
					acl = append(acl, user(rng.IntN(f.principals)))
				} else {
					acl = append(acl, fmt.Sprintf("group:g%d", rng.IntN(f.groups)))
				}
			}
			doc, _, err := svc.Put(ctx, aclTenant, retrieval.PutRequest{DocumentID: fmt.Sprintf("d%d", d), Content: content, ACL: acl})
			if err != nil {
				return row, err
			}
			if _, _, err := svc.Put(ctx, openTenant, retrieval.PutRequest{DocumentID: fmt.Sprintf("d%d", d), Content: content, ACL: []string{"tenant"}}); err != nil {
				return row, err
			}
			written += 2 * doc.Chunks
			if d%max(1, docs/10) == 0 {
				progress(fmt.Sprintf("indexed %d of %d documents", d, docs))
			}
		}
		row.Chunks, row.IngestPerSec = written/2, float64(written)/time.Since(start).Seconds()
	}
	// The same queries and principals for both tenants, taken in turns (the
	// order swapped every query) so a burst of load on a shared machine
	// lands on both sides alike.
	qrng := rand.New(rand.NewPCG(2, 2))
	qz := rand.NewZipf(qrng, 1.1, 1, 20000)
	type side struct {
		tenant string
		first  time.Duration // the first retrieval: it loads the tenant's index
		lat    []time.Duration
		cpu    time.Duration
		hits   int
	}
	open, acl := &side{tenant: openTenant}, &side{tenant: aclTenant}
	const warmup = 5 // the first one loads the tenant's index
	for i := range f.queries + warmup {
		q := benchText(qrng, qz, 3)
		p := user(qrng.IntN(f.principals))
		order := []*side{open, acl}
		if i%2 == 1 {
			order[0], order[1] = acl, open
		}
		for _, sd := range order {
			c0 := processCPU()
			t0 := time.Now()
			s, err := svc.Retrieve(ctx, sd.tenant, retrieval.RetrieveRequest{Query: q, Principal: p, K: 10})
			if err != nil {
				return row, err
			}
			if i == 0 {
				sd.first = time.Since(t0)
			}
			if i >= warmup {
				sd.lat = append(sd.lat, time.Since(t0))
				sd.cpu += processCPU() - c0
				sd.hits += len(s.Hits)
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, sd := range []*side{open, acl} {
		slices.Sort(sd.lat)
	}
	n := float64(f.queries)
	row.Openp50ms, row.Openp95ms = ms(open.lat[len(open.lat)/2]), ms(open.lat[len(open.lat)*95/100])
	row.ACLp50ms, row.ACLp95ms = ms(acl.lat[len(acl.lat)/2]), ms(acl.lat[len(acl.lat)*95/100])
	row.OpenCPUms, row.ACLCPUms = ms(open.cpu)/n, ms(acl.cpu)/n
	row.OpenFirstms, row.ACLFirstms = ms(open.first), ms(acl.first)
	row.OpenHits, row.ACLHits = float64(open.hits)/n, float64(acl.hits)/n
	return row, nil
}

// processCPU is the CPU time this process has used (user and system): on
// a shared machine it moves with the work done, not with the neighbours'.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
