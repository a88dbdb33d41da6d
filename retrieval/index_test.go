package retrieval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mementohq/memento/search"
)

// indexFixture is random chunks with random ACLs and vectors, and the
// brute-force ranking the index must reproduce.
type indexFixture struct {
	rows map[string]IndexRow // chunk id -> row
}

func newIndexFixture(rng *rand.Rand, docs int) (*indexFixture, []IndexRow) {
	words := []string{"refund", "invoice", "outage", "runbook", "payroll", "laptop", "badge", "budget", "audit", "ledger"}
	principals := []string{"user:a", "user:b", "user:c", "group:x", "group:y", "tenant"}
	f := &indexFixture{rows: map[string]IndexRow{}}
	var rows []IndexRow
	for d := range docs {
		var acl []string
		for range 1 + rng.IntN(2) {
			acl = append(acl, principals[rng.IntN(len(principals))])
		}
		acl = dedupSorted(acl)
		for c := range 1 + rng.IntN(4) {
			var b strings.Builder
			for range 3 + rng.IntN(30) {
				b.WriteString(words[rng.IntN(len(words))] + " ")
			}
			v := make([]float32, 8)
			for i := range v {
				v[i] = rng.Float32()*2 - 1
			}
			search.Normalize(v)
			r := IndexRow{ChunkID: ChunkID(fmt.Sprintf("d%d", d), 1, c), DocumentID: fmt.Sprintf("d%d", d), Version: 1, ACL: acl,
				Terms: EncodeTerms(b.String()), Vector: v}
			if rng.IntN(5) == 0 { // stored without terms: the index derives them
				r.Terms, r.Text = "", b.String()
			}
			rows = append(rows, r)
			f.rows[r.ChunkID] = r
		}
	}
	return f, rows
}

func (f *indexFixture) terms(r IndexRow) map[string]int {
	out := map[string]int{}
	t := r.Terms
	if t == "" {
		t = EncodeTerms(r.Text)
	}
	decodeTerms(t, func(term string, tf int) { out[term] = tf })
	return out
}

// want ranks by brute force: BM25 and cosine over the readable chunks only.
func (f *indexFixture) want(entries, query []string, qv []float32, n int) (text, vec []search.Ranked) {
	var readable []IndexRow
	for _, r := range f.rows {
		if Readable(r.ACL, entries) {
			readable = append(readable, r)
		}
	}
	if len(readable) == 0 {
		return nil, nil
	}
	total := 0
	for _, r := range readable {
		for _, tf := range f.terms(r) {
			total += tf
		}
	}
	N, avg := float64(len(readable)), float64(total)/float64(len(readable))
	scores := map[string]float64{}
	seen := map[string]bool{}
	for _, q := range query {
		for _, t := range search.Tokens(q) {
			if seen[t] {
				continue
			}
			seen[t] = true
			df := 0.0
			for _, r := range readable {
				if f.terms(r)[t] > 0 {
					df++
				}
			}
			idf := math.Log(1 + (N-df+0.5)/(df+0.5))
			for _, r := range readable {
				tf := float64(f.terms(r)[t])
				if tf == 0 {
					continue
				}
				l := 0
				for _, c := range f.terms(r) {
					l += c
				}
				scores[r.ChunkID] += idf * tf * (search.BM25K1 + 1) / (tf + search.BM25K1*(1-search.BM25B+search.BM25B*float64(l)/avg))
			}
		}
	}
	for id, s := range scores {
		text = append(text, search.Ranked{ID: id, Score: s})
	}
	for _, r := range readable {
		if s := float64(search.Dot(qv, r.Vector)); s > 0 {
			vec = append(vec, search.Ranked{ID: r.ChunkID, Score: s})
		}
	}
	order := func(a, b search.Ranked) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	}
	slices.SortFunc(text, order)
	slices.SortFunc(vec, order)
	return text[:min(n, len(text))], vec[:min(n, len(vec))]
}

func searchIndex(x *tenantIndex, entries, query []string, qv []float32, n int) (text, vec []search.Ranked) {
	sc := x.scratch()
	defer func() { sc.release(); x.pool.Put(sc) }()
	x.readable(sc, entries)
	return x.searchText(sc, search.Analyze(strings.Join(query, " ")), n), x.searchVector(sc, qv, n)
}

func sameRanking(t *testing.T, what string, got, want []search.Ranked) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, want %d:\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range got {
		// float32 accumulation in the index: scores agree to about 1e-6,
		// so a near-tie may swap; the ids must still be the right set.
		if math.Abs(got[i].Score-want[i].Score) > 1e-4*math.Max(1, want[i].Score) {
			t.Fatalf("%s: hit %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	g, w := map[string]bool{}, map[string]bool{}
	for i := range got {
		g[got[i].ID], w[want[i].ID] = true, true
	}
	for id := range g {
		if !w[id] && math.Abs(got[len(got)-1].Score-want[len(want)-1].Score) > 1e-4 {
			t.Fatalf("%s: %s ranked, not among the best", what, id)
		}
	}
}

// TestTenantIndexMatchesBruteForce checks the in-process index against a
// brute-force ranking over the readable chunks (so nothing unreadable is
// ranked, and statistics come from the readable chunks alone), before and
// after documents are replaced and removed and the slots compacted.
func TestTenantIndexMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f, rows := newIndexFixture(rng, 300)
	x := newTenantIndex("t")
	for _, r := range rows {
		x.add(r)
	}
	entrySets := [][]string{
		Entries("user:a", nil), Entries("user:b", []string{"x"}), Entries("user:c", []string{"x", "y"}), {"user:nobody"},
	}
	queries := [][]string{{"refund"}, {"outage", "runbook"}, {"payroll", "laptop", "badge"}, {"nothing"}}
	check := func(stage string) {
		t.Helper()
		for _, es := range entrySets {
			for _, q := range queries {
				qv := make([]float32, 8)
				for i := range qv {
					qv[i] = rng.Float32()*2 - 1
				}
				search.Normalize(qv)
				gt, gv := searchIndex(x, es, q, qv, 20)
				wt, wv := f.want(es, q, qv, 20)
				sameRanking(t, fmt.Sprintf("%s: text %v as %v", stage, q, es), gt, wt)
				sameRanking(t, fmt.Sprintf("%s: vector as %v", stage, es), gv, wv)
			}
		}
	}
	check("fresh")
	if x.dead != 0 {
		t.Fatalf("%d dead slots in a fresh index", x.dead)
	}
	// Replace a third of the documents by a version 2 with a new ACL, drop
	// another third, and compact.
	for d := range 300 {
		id := fmt.Sprintf("d%d", d)
		switch d % 3 {
		case 0:
			for cid, r := range f.rows {
				if r.DocumentID == id {
					delete(f.rows, cid)
					r.ChunkID, r.Version, r.ACL = strings.Replace(cid, ":p1:", ":p2:", 1), 2, []string{"user:a"}
					f.rows[r.ChunkID] = r
					x.add(r)
				}
			}
		case 1:
			x.removeDoc(id)
			for cid, r := range f.rows {
				if r.DocumentID == id {
					delete(f.rows, cid)
				}
			}
		}
	}
	if x.dead == 0 {
		t.Fatal("replaced and removed documents left no dead slot")
	}
	check("after changes")
	x.compact()
	if x.dead != 0 || len(x.ids) != len(f.rows) {
		t.Fatalf("compacted: %d dead, %d slots, want 0 and %d", x.dead, len(x.ids), len(f.rows))
	}
	check("compacted")
}

func TestEncodeTerms(t *testing.T) {
	got := EncodeTerms("Refunds, refund and REFUNDED: the refund policy.")
	if got != "and:1 polici:1 refund:4 the:1" {
		t.Fatalf("EncodeTerms = %q", got)
	}
	n := 0
	decodeTerms(got+" bad :2 x:0 y:z", func(term string, tf int) { n += tf })
	if n != 7 {
		t.Fatalf("decoded %d terms, want 7 (malformed ones skipped)", n)
	}
}
