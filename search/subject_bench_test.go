package search

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/llm/hashembed"
)

var subjectSize = flag.Int("subject.size", 100_000, "claims of the subject BenchmarkSubject* searches")

// subjectCorpus is the synthetic corpus of `memento bench memory`: a verb
// and seven made-up words drawn by a Zipf law (s 1.1) from 20k, embedded
// by the offline hashing embedder, with three-word queries drawn alike.
type subjectCorpus struct {
	ids     []string
	texts   []string
	vecs    [][]float32
	queries []string
	qvecs   [][]float32
}

var (
	corpusOnce sync.Map // size -> *subjectCorpus
)

func corpusWords() []string {
	cons, vows := "bdfgklmnprstvz", "aeiou"
	ws := make([]string, 20_000)
	for i := range ws {
		var b strings.Builder
		for n := i + 1; n > 0; n /= len(cons) * len(vows) {
			d := n % (len(cons) * len(vows))
			b.WriteByte(cons[d%len(cons)])
			b.WriteByte(vows[d/len(cons)])
		}
		ws[i] = b.String() + "n"
	}
	return ws
}

func loadSubjectCorpus(tb testing.TB, n int) *subjectCorpus {
	tb.Helper()
	if c, ok := corpusOnce.Load(n); ok {
		return c.(*subjectCorpus)
	}
	words := corpusWords()
	verbs := []string{"likes", "prefers", "hates", "collects", "studies", "plays", "cooks", "visits", "reads", "avoids", "buys", "repairs"}
	r := rand.New(rand.NewSource(1))
	z := rand.NewZipf(r, 1.1, 2, uint64(len(words)-1))
	emb := hashembed.New(0)
	c := &subjectCorpus{}
	for i := range n {
		ws := []string{verbs[r.Intn(len(verbs))]}
		for range 7 {
			ws = append(ws, words[z.Uint64()])
		}
		c.ids = append(c.ids, "m"+strconv.Itoa(i))
		c.texts = append(c.texts, strings.Join(ws, " "))
	}
	for i := range 200 {
		_ = i
		c.queries = append(c.queries, words[z.Uint64()]+" "+words[z.Uint64()]+" "+words[z.Uint64()])
	}
	var err error
	if c.vecs, err = emb.Embed(context.Background(), c.texts); err != nil {
		tb.Fatal(err)
	}
	if c.qvecs, err = emb.Embed(context.Background(), c.queries); err != nil {
		tb.Fatal(err)
	}
	corpusOnce.Store(n, c)
	return c
}

// BenchmarkSubjectText is the BM25 ranking of one search of a subject of
// -subject.size claims (k 30, as memory.Service asks).
func BenchmarkSubjectText(b *testing.B) {
	c := loadSubjectCorpus(b, *subjectSize)
	x := NewTextIndex()
	for i, id := range c.ids {
		x.Upsert(id, c.texts[i], Meta{Namespace: "default"})
	}
	keep := func(_ string, m Meta) bool { return m.Namespace == "default" }
	b.ResetTimer()
	i := 0
	for b.Loop() {
		x.SearchWith(c.queries[i%len(c.queries)], 30, keep)
		i++
	}
}

// BenchmarkSubjectVector is the exact vector scan of the same search.
func BenchmarkSubjectVector(b *testing.B) {
	c := loadSubjectCorpus(b, *subjectSize)
	x := NewVectorIndexWith(len(c.vecs[0]), Options{ExactLimit: -1, Workers: 2})
	for i, id := range c.ids {
		x.Upsert(id, c.vecs[i], Meta{Namespace: "default"})
	}
	keep := func(_ string, m Meta) bool { return m.Namespace == "default" }
	b.ResetTimer()
	i := 0
	for b.Loop() {
		x.Search(c.qvecs[i%len(c.qvecs)], 30, keep)
		i++
	}
}

var (
	quantReranks = flag.String("quant.rerank", "100,200,500,1000,2000", "comma-separated Rerank values for BenchmarkQuantRecall")
	quantData    = flag.String("quant.data", "hash,random,clustered", "data sets for BenchmarkQuantRecall: hash (the bench memory corpus), random, clustered")
)

// BenchmarkQuantRecall measures, per data set and Rerank, the quantized
// scan (codes, then Rerank re-scored) against the float scan on the same
// index and queries, interleaved query by query: median thread CPU time
// of each, their ratio and recall@10 of the quantized scan against the
// float scan. It is where DefaultQuantizeLimit and DefaultRerank come from:
//
//	go test -run x -bench QuantRecall -benchtime 100x ./search -subject.size 100000
func BenchmarkQuantRecall(b *testing.B) {
	n := *subjectSize
	for _, data := range strings.Split(*quantData, ",") {
		var vs, qs [][]float32
		switch data {
		case "hash":
			c := loadSubjectCorpus(b, n)
			vs, qs = c.vecs, c.qvecs
		case "random", "clustered":
			r := rand.New(rand.NewSource(int64(n)))
			var centres [][]float32
			for range 100 {
				centres = append(centres, randVec(r, 256))
			}
			draw := func() []float32 {
				if data == "clustered" {
					return clusteredVec(r, centres)
				}
				return randVec(r, 256)
			}
			for range n {
				vs = append(vs, draw())
			}
			for range 100 {
				qs = append(qs, draw())
			}
		default:
			b.Fatalf("unknown data set %q", data)
		}
		for _, rr := range ints(b, *quantReranks) {
			b.Run(fmt.Sprintf("data=%s/n=%d/rerank=%d", data, n, rr), func(b *testing.B) {
				x := NewVectorIndexWith(len(vs[0]), Options{ExactLimit: -1, QuantizeLimit: 1, Rerank: rr})
				for i, v := range vs {
					x.Upsert("v"+strconv.Itoa(i), v, Meta{})
				}
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var fl, qt []time.Duration
				hit, all := 0, 0
				i := 0
				for b.Loop() {
					q := qs[i%len(qs)]
					i++
					t1 := cpuTime(b)
					want := x.floatScan(q, 10, nil)
					t2 := cpuTime(b)
					got := x.quantSearch(q, 10, nil)
					fl, qt = append(fl, t2-t1), append(qt, cpuTime(b)-t2)
					in := map[string]bool{}
					for _, g := range got {
						in[g.ID] = true
					}
					for _, w := range want {
						all++
						if in[w.ID] {
							hit++
						}
					}
				}
				slices.Sort(fl)
				slices.Sort(qt)
				mf, mq := fl[len(fl)/2], qt[len(qt)/2]
				b.ReportMetric(float64(mf.Microseconds()), "float-us")
				b.ReportMetric(float64(mq.Microseconds()), "quant-us")
				b.ReportMetric(float64(mf)/float64(max(mq, 1)), "speedup")
				b.ReportMetric(float64(hit)/float64(max(all, 1)), "recall@10")
			})
		}
	}
}
