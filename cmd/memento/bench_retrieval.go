package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
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
retrievals in each and report p50/p95, the filtered/open ratio, and the
ingestion rate (chunk + embed + index). Embedded SQLite in a temporary
directory by default; --postgres adds PostgreSQL.`,
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
	t := newTable(out, "BACKEND", "CHUNKS", "INGEST CHUNKS/S", "ACL P50 MS", "ACL P95 MS", "OPEN P50 MS", "OPEN P95 MS", "P95 ACL/OPEN", "HITS ACL/OPEN")
	for _, r := range rows {
		t.row(r.Backend, fmt.Sprint(r.Chunks), fmt.Sprintf("%.0f", r.IngestPerSec), fmt.Sprintf("%.2f", r.ACLp50ms), fmt.Sprintf("%.2f", r.ACLp95ms),
			fmt.Sprintf("%.2f", r.Openp50ms), fmt.Sprintf("%.2f", r.Openp95ms), fmt.Sprintf("%.2f", r.ACLp95ms/r.Openp95ms),
			fmt.Sprintf("%.1f/%.1f", r.ACLHits, r.OpenHits))
	}
	return t.flush()
}

func benchRetrievalOne(ctx context.Context, st retrieval.Store, chunks int, f benchRetrievalFlags, progress func(string)) (benchRetrievalRow, error) {
	rng := rand.New(rand.NewPCG(1, uint64(chunks)))
	zipf := rand.NewZipf(rng, 1.1, 1, 20000)
	stamp := time.Now().UnixNano()
	aclTenant, openTenant := fmt.Sprintf("bench-acl-%d", stamp), fmt.Sprintf("bench-open-%d", stamp)
	svc := retrieval.NewService(st, retrieval.Options{Embedder: hashembed.New(hashembed.DefaultDim)})
	user := func(i int) string { return fmt.Sprintf("user:u%d", i) }
	for u := range f.principals {
		for range 1 + rng.IntN(3) {
			if _, err := svc.SetMember(ctx, aclTenant, fmt.Sprintf("g%d", rng.IntN(f.groups)), user(u), true); err != nil {
				return benchRetrievalRow{}, err
			}
		}
	}
	const perDoc = 10
	docs := max(1, chunks/perDoc)
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
			return benchRetrievalRow{}, err
		}
		if _, _, err := svc.Put(ctx, openTenant, retrieval.PutRequest{DocumentID: fmt.Sprintf("d%d", d), Content: content, ACL: []string{"tenant"}}); err != nil {
			return benchRetrievalRow{}, err
		}
		written += 2 * doc.Chunks
		if d%max(1, docs/10) == 0 {
			progress(fmt.Sprintf("indexed %d of %d documents", d, docs))
		}
	}
	row := benchRetrievalRow{Chunks: written / 2, IngestPerSec: float64(written) / time.Since(start).Seconds()}
	measure := func(tenant string) (p50, p95, hits float64, err error) {
		qrng := rand.New(rand.NewPCG(2, 2)) // the same queries and principals for both tenants
		qz := rand.NewZipf(qrng, 1.1, 1, 20000)
		var lat []time.Duration
		total := 0
		for i := range f.queries + 5 {
			q := benchText(qrng, qz, 3)
			p := user(qrng.IntN(f.principals))
			t0 := time.Now()
			s, err := svc.Retrieve(ctx, tenant, retrieval.RetrieveRequest{Query: q, Principal: p, K: 10})
			if err != nil {
				return 0, 0, 0, err
			}
			if i >= 5 { // the first ones load the vector index
				lat = append(lat, time.Since(t0))
				total += len(s.Hits)
			}
		}
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		return ms(lat[len(lat)/2]), ms(lat[len(lat)*95/100]), float64(total) / float64(len(lat)), nil
	}
	var err error
	if row.Openp50ms, row.Openp95ms, row.OpenHits, err = measure(openTenant); err != nil {
		return row, err
	}
	if row.ACLp50ms, row.ACLp95ms, row.ACLHits, err = measure(aclTenant); err != nil {
		return row, err
	}
	return row, nil
}
