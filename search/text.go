package search

import (
	"container/heap"
	"math"
	"sort"
	"strings"
	"unicode"

	edlib "github.com/hbollon/go-edlib"
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
// live in memory anyway (a run's history being packed into a context) or
// that a cache mirrors from a store (a subject's claims). Documents live in
// slots; a term's posting list holds (slot, term frequency) pairs and a
// search accumulates scores in a dense array, so a query costs its terms'
// postings, not a map lookup per hit. It is not safe for concurrent use,
// searches included (they use the index's scratch space); its owner locks.
type TextIndex struct {
	pos   map[string]int32 // id -> slot
	ids   []string         // slot -> id
	meta  []Meta
	dlen  []int32   // slot -> tokens; -1 for a free slot
	terms [][]int32 // slot -> its distinct term ids, to remove it
	tfs   [][]int32 // slot -> the frequency of each of terms[slot]
	free  []int32
	dict  map[string]int32 // term -> term id
	words []string         // term id -> term
	post  [][]posting      // term id -> postings
	total int              // tokens over all documents
	// scratch of Search, sized to the slots
	score   []float64
	touched []int32
}

type posting struct{ slot, tf int32 }

// NewTextIndex returns an empty index.
func NewTextIndex() *TextIndex {
	return &TextIndex{pos: map[string]int32{}, dict: map[string]int32{}}
}

// Len is the number of documents.
func (x *TextIndex) Len() int { return len(x.pos) }

// Has reports whether id is indexed.
func (x *TextIndex) Has(id string) bool { _, ok := x.pos[id]; return ok }

// Add indexes text under id, replacing what id had.
func (x *TextIndex) Add(id, text string) { x.Upsert(id, text, Meta{}) }

// Upsert indexes text under id with m (what SearchWith filters on),
// replacing what id had.
func (x *TextIndex) Upsert(id, text string, m Meta) {
	x.Remove(id)
	ts := Tokens(text)
	var slot int32
	if n := len(x.free); n > 0 {
		slot, x.free = x.free[n-1], x.free[:n-1]
	} else {
		slot = int32(len(x.ids))
		x.ids, x.meta, x.dlen, x.terms, x.tfs = append(x.ids, ""), append(x.meta, Meta{}), append(x.dlen, 0), append(x.terms, nil), append(x.tfs, nil)
	}
	x.pos[id] = slot
	x.ids[slot], x.meta[slot], x.dlen[slot] = id, m, int32(len(ts))
	x.total += len(ts)
	tf := make(map[string]int32, len(ts))
	for _, t := range ts {
		tf[t]++
	}
	own := make([]int32, 0, len(tf))
	freq := make([]int32, 0, len(tf))
	for t, n := range tf {
		tid, ok := x.dict[t]
		if !ok {
			tid = int32(len(x.post))
			x.dict[t] = tid
			x.post = append(x.post, nil)
			x.words = append(x.words, t)
		}
		x.post[tid] = append(x.post[tid], posting{slot: slot, tf: n})
		own = append(own, tid)
		freq = append(freq, n)
	}
	x.terms[slot], x.tfs[slot] = own, freq
}

// Remove drops id.
func (x *TextIndex) Remove(id string) {
	slot, ok := x.pos[id]
	if !ok {
		return
	}
	delete(x.pos, id)
	for _, tid := range x.terms[slot] {
		p := x.post[tid]
		for i := range p {
			if p[i].slot == slot {
				p[i] = p[len(p)-1]
				x.post[tid] = p[:len(p)-1]
				break
			}
		}
	}
	x.total -= int(x.dlen[slot])
	x.ids[slot], x.meta[slot], x.dlen[slot], x.terms[slot], x.tfs[slot] = "", Meta{}, -1, nil, nil
	x.free = append(x.free, slot)
}

// Search ranks the documents matching any of the query's terms (analysed
// like the documents) by BM25, best first, at most k, among those keep
// accepts (nil keeps all). Ties break by id.
func (x *TextIndex) Search(query string, k int, keep func(id string) bool) []Ranked {
	if keep == nil {
		return x.SearchWith(query, k, nil)
	}
	return x.SearchWith(query, k, func(id string, _ Meta) bool { return keep(id) })
}

// SearchWith is Search with a filter that sees each document's Meta.
func (x *TextIndex) SearchWith(query string, k int, keep func(id string, m Meta) bool) []Ranked {
	return x.searchTerms(Analyze(query), k, keep)
}

// SearchTerms is Search for terms already analysed (Analyze, Expansion).
func (x *TextIndex) SearchTerms(terms []string, k int, keep func(id string) bool) []Ranked {
	if keep == nil {
		return x.searchTerms(terms, k, nil)
	}
	return x.searchTerms(terms, k, func(id string, _ Meta) bool { return keep(id) })
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
	n := float64(len(x.pos))
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
	common := max(2, len(x.pos)/10)
	w := map[int32]float64{}
	for r, id := range top {
		slot, ok := x.pos[id]
		if !ok || x.dlen[slot] <= 0 {
			continue
		}
		dw := 1 / float64(r+1)
		for i, tid := range x.terms[slot] {
			df, t := len(x.post[tid]), x.words[tid]
			if skip[t] || df < 2 || df > common || len(t) < 3 {
				continue
			}
			w[tid] += dw * float64(x.tfs[slot][i]) / float64(x.dlen[slot]) * x.idf(df)
		}
	}
	terms := make([]Ranked, 0, len(w))
	for tid, v := range w {
		terms = append(terms, Ranked{ID: x.words[tid], Score: v})
	}
	sort.Slice(terms, func(i, j int) bool { return better(terms[i], terms[j]) })
	out := make([]string, 0, n)
	for _, t := range terms[:min(n, len(terms))] {
		out = append(out, t.ID)
	}
	return out
}

func (x *TextIndex) searchTerms(terms []string, k int, keep func(id string, m Meta) bool) []Ranked {
	if k <= 0 || len(x.pos) == 0 {
		return nil
	}
	n := float64(len(x.pos))
	avg := float64(x.total) / n
	if avg == 0 {
		avg = 1
	}
	if len(x.score) < len(x.ids) {
		x.score = make([]float64, len(x.ids))
	}
	seen := map[int32]bool{}
	x.touched = x.touched[:0]
	for _, t := range terms {
		tid, ok := x.dict[t]
		if !ok || seen[tid] {
			continue
		}
		seen[tid] = true
		p := x.post[tid]
		if len(p) == 0 {
			continue
		}
		df := float64(len(p))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, e := range p {
			f := float64(e.tf)
			if x.score[e.slot] == 0 {
				x.touched = append(x.touched, e.slot)
			}
			// every term adds a positive amount, so 0 means untouched
			x.score[e.slot] += idf * f * (BM25K1 + 1) / (f + BM25K1*(1-BM25B+BM25B*float64(x.dlen[e.slot])/avg))
		}
	}
	h := &minHeap{}
	for _, slot := range x.touched {
		s := x.score[slot]
		x.score[slot] = 0
		if keep != nil && !keep(x.ids[slot], x.meta[slot]) {
			continue
		}
		r := Ranked{ID: x.ids[slot], Score: s}
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

// Spelling variants: a query term the index has never seen matches nothing,
// though the history may well hold what it asks about under another
// spelling — a typo ("reccomend"), or a compound written apart or together
// ("roadtrip", "road trip"). Variants proposes the index terms such a term
// stands for, so a search can add them.
const (
	// variantMinLen is the shortest unknown term given spelling neighbours:
	// below it, one edit turns most words into other words.
	variantMinLen = 7
	// longVariantLen is the length from which two edits are allowed.
	longVariantLen = 9
	// maxVariants bounds the terms one unknown term brings.
	maxVariants = 3
)

// Variants returns index terms that the query's terms unknown to the index
// (or its adjacent words run together) may stand for: terms one edit away
// (two for long terms, optimal string alignment distance: a transposition
// is one edit), the two halves of an unknown compound, and the compound of
// two adjacent query words. Terms are stemmed like Tokens; the query's own
// terms are not returned.
func (x *TextIndex) Variants(query string) []string {
	words := Tokens(query)
	seen := map[string]bool{}
	for _, w := range words {
		seen[w] = true
	}
	var out []string
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	known := func(t string) bool { tid, ok := x.dict[t]; return ok && len(x.post[tid]) > 0 }
	for i, w := range words {
		if i > 0 && !stopwords[words[i-1]] && !stopwords[w] {
			// "road trip" asked, "roadtrip" written
			if j := stem(words[i-1] + w); known(j) {
				add(j)
			}
		}
		if stopwords[w] || known(w) {
			continue
		}
		// "roadtrip" asked, "road trip" written
		split := false
		for k := 4; k <= len(w)-4 && !split; k++ {
			a, b := stem(w[:k]), stem(w[k:])
			if split = known(a) && known(b) && !stopwords[w[:k]] && !stopwords[w[k:]]; split {
				add(a)
				add(b)
			}
		}
		// two known words explain it better than a misspelling does
		if split || len(w) < variantMinLen {
			continue
		}
		maxD := 1
		if len(w) >= longVariantLen {
			maxD = 2
		}
		type near struct {
			t  string
			d  int
			df int
		}
		var cands []near
		for t, tid := range x.dict {
			if len(x.post[tid]) == 0 || abs(len(t)-len(w)) > maxD || len(t) < variantMinLen-1 {
				continue
			}
			if d := edlib.OSADamerauLevenshteinDistance(w, t); d <= maxD {
				cands = append(cands, near{t, d, len(x.post[tid])})
			}
		}
		// the nearest first, then the commonest spelling, then by name
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if a.d != b.d {
				return a.d < b.d
			}
			if a.df != b.df {
				return a.df > b.df
			}
			return a.t < b.t
		})
		for _, c := range cands[:min(maxVariants, len(cands))] {
			add(c.t)
		}
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
