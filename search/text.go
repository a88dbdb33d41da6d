package search

import (
	"container/heap"
	"math"
	"sort"
	"strings"
	"unicode"
)

// BM25 parameters: the usual defaults (Robertson; Lucene and FTS5 use them).
const (
	BM25K1 = 1.2
	BM25B  = 0.75
)

// Tokens splits text into lowercase letter/digit runs stemmed with Porter2,
// the analysis SQLite's porter tokenizer and PostgreSQL's english config
// approximate.
func Tokens(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for i, w := range words {
		words[i] = stem(w)
	}
	return words
}

// TextIndex is an in-process BM25 index with posting lists, for texts that
// live in memory anyway (a run's history being packed into a context). It is
// not safe for concurrent use; its owner locks.
type TextIndex struct {
	docLen   map[string]int
	postings map[string]map[string]int // term -> doc -> tf
	docTerms map[string]map[string]int // doc -> term -> tf: removal and expansion
	total    int
}

// NewTextIndex returns an empty index.
func NewTextIndex() *TextIndex {
	return &TextIndex{docLen: map[string]int{}, postings: map[string]map[string]int{}, docTerms: map[string]map[string]int{}}
}

// Len is the number of documents.
func (x *TextIndex) Len() int { return len(x.docLen) }

// Add indexes text under id, replacing what id had.
func (x *TextIndex) Add(id, text string) {
	x.Remove(id)
	ts := Tokens(text)
	x.docLen[id] = len(ts)
	x.total += len(ts)
	tf := map[string]int{}
	for _, t := range ts {
		tf[t]++
	}
	x.docTerms[id] = tf
	for t, n := range tf {
		p := x.postings[t]
		if p == nil {
			p = map[string]int{}
			x.postings[t] = p
		}
		p[id] = n
	}
}

// Remove drops id.
func (x *TextIndex) Remove(id string) {
	n, ok := x.docLen[id]
	if !ok {
		return
	}
	delete(x.docLen, id)
	x.total -= n
	for t := range x.docTerms[id] {
		p := x.postings[t]
		delete(p, id)
		if len(p) == 0 {
			delete(x.postings, t)
		}
	}
	delete(x.docTerms, id)
}

// Analyze turns a query into the distinct index terms it searches: its
// meaningful words (Terms), stemmed like the documents.
func Analyze(query string) []string {
	var out []string
	seen := map[string]bool{}
	for _, term := range Terms(query) {
		for _, t := range Tokens(term) {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// idf is the BM25 inverse document frequency of a term in df documents.
func (x *TextIndex) idf(df int) float64 {
	n := float64(len(x.docLen))
	return math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
}

// Expansion returns up to n index terms that characterise the documents
// top (the best hits of a first search, best first), weighted as in
// relevance-model feedback (RM3): Σ over the documents of the document's
// weight × tf/length × idf, the document weight falling with its rank. Terms
// in exclude (the query's own), in one document only, or in more than a
// tenth of the index are skipped: the first add noise, the last nothing.
// Searching them (SearchTerms) finds what the question's words miss but
// its best answers share.
func (x *TextIndex) Expansion(top []string, exclude []string, n int) []string {
	if n <= 0 || len(top) == 0 {
		return nil
	}
	skip := make(map[string]bool, len(exclude))
	for _, t := range exclude {
		skip[t] = true
	}
	common := max(2, len(x.docLen)/10)
	w := map[string]float64{}
	for r, id := range top {
		dl := x.docLen[id]
		if dl == 0 {
			continue
		}
		dw := 1 / float64(r+1)
		for t, tf := range x.docTerms[id] {
			df := len(x.postings[t])
			if skip[t] || df < 2 || df > common || len(t) < 3 {
				continue
			}
			w[t] += dw * float64(tf) / float64(dl) * x.idf(df)
		}
	}
	terms := make([]Ranked, 0, len(w))
	for t, v := range w {
		terms = append(terms, Ranked{ID: t, Score: v})
	}
	sort.Slice(terms, func(i, j int) bool { return better(terms[i], terms[j]) })
	out := make([]string, 0, n)
	for _, t := range terms {
		if len(out) == n {
			break
		}
		out = append(out, t.ID)
	}
	return out
}

// Search ranks the documents matching any of the query's terms (analysed
// like the documents) by BM25, best first, at most k, among those keep
// accepts (nil keeps all). Ties break by id.
func (x *TextIndex) Search(query string, k int, keep func(id string) bool) []Ranked {
	return x.SearchTerms(Analyze(query), k, keep)
}

// SearchTerms is Search for terms already analysed (Analyze, Expansion).
func (x *TextIndex) SearchTerms(terms []string, k int, keep func(id string) bool) []Ranked {
	if k <= 0 || len(x.docLen) == 0 {
		return nil
	}
	avg := float64(x.total) / float64(len(x.docLen))
	if avg == 0 {
		avg = 1
	}
	scores := map[string]float64{}
	for _, t := range terms {
		p := x.postings[t]
		if len(p) == 0 {
			continue
		}
		idf := x.idf(len(p))
		for id, tf := range p {
			f := float64(tf)
			scores[id] += idf * f * (BM25K1 + 1) / (f + BM25K1*(1-BM25B+BM25B*float64(x.docLen[id])/avg))
		}
	}
	h := &minHeap{}
	for id, s := range scores {
		if keep != nil && !keep(id) {
			continue
		}
		r := Ranked{ID: id, Score: s}
		if h.Len() < k {
			heap.Push(h, r)
		} else if better(r, (*h)[0]) {
			(*h)[0] = r
			heap.Fix(h, 0)
		}
	}
	out := make([]Ranked, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(Ranked)
	}
	return out
}
