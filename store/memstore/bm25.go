package memstore

import (
	"math"

	"github.com/mementohq/memento/store/internal/memsql"
)

// BM25 parameters: the usual defaults (Robertson; Lucene and FTS5 use them too).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// tokens splits text into lowercase letter/digit runs, each stemmed with
// Porter2 (the SQLite store indexes the same tokens).
func tokens(text string) []string { return memsql.Tokens(text) }

// bm25Doc is one indexed claim: its term frequencies and length.
type bm25Doc struct {
	id  string
	tf  map[string]int
	len int
}

func newBM25Doc(id, text string) bm25Doc {
	ts := tokens(text)
	tf := make(map[string]int, len(ts))
	for _, t := range ts {
		tf[t]++
	}
	return bm25Doc{id: id, tf: tf, len: len(ts)}
}

// bm25 scores docs against the query terms (any term matches), with the
// collection statistics taken over docs themselves. Docs matching no term
// are left out.
func bm25(docs []bm25Doc, terms []string) map[string]float64 {
	q := map[string]bool{}
	for _, t := range terms {
		for _, tok := range tokens(t) {
			q[tok] = true
		}
	}
	out := map[string]float64{}
	if len(q) == 0 || len(docs) == 0 {
		return out
	}
	var total int
	df := map[string]int{}
	for _, d := range docs {
		total += d.len
		for t := range q {
			if d.tf[t] > 0 {
				df[t]++
			}
		}
	}
	n := float64(len(docs))
	avg := float64(total) / n
	if avg == 0 {
		avg = 1
	}
	for _, d := range docs {
		var s float64
		matched := false
		for t := range q {
			f := float64(d.tf[t])
			if f == 0 {
				continue
			}
			matched = true
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			s += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(d.len)/avg))
		}
		if matched {
			out[d.id] = s
		}
	}
	return out
}
