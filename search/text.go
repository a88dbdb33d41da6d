package search

import (
	"container/heap"
	"math"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
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
		words[i] = english.Stem(w, true)
	}
	return words
}

// TextIndex is an in-process BM25 index with posting lists, for texts that
// live in memory anyway (a run's history being packed into a context). It is
// not safe for concurrent use; its owner locks.
type TextIndex struct {
	docLen   map[string]int
	postings map[string]map[string]int // term -> doc -> tf
	total    int
}

// NewTextIndex returns an empty index.
func NewTextIndex() *TextIndex {
	return &TextIndex{docLen: map[string]int{}, postings: map[string]map[string]int{}}
}

// Len is the number of documents.
func (x *TextIndex) Len() int { return len(x.docLen) }

// Add indexes text under id, replacing what id had.
func (x *TextIndex) Add(id, text string) {
	x.Remove(id)
	ts := Tokens(text)
	x.docLen[id] = len(ts)
	x.total += len(ts)
	for _, t := range ts {
		p := x.postings[t]
		if p == nil {
			p = map[string]int{}
			x.postings[t] = p
		}
		p[id]++
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
	for t, p := range x.postings {
		if _, ok := p[id]; ok {
			delete(p, id)
			if len(p) == 0 {
				delete(x.postings, t)
			}
		}
	}
}

// Search ranks the documents matching any of the query's terms (analysed
// like the documents) by BM25, best first, at most k, among those keep
// accepts (nil keeps all). Ties break by id.
func (x *TextIndex) Search(query string, k int, keep func(id string) bool) []Ranked {
	if k <= 0 || len(x.docLen) == 0 {
		return nil
	}
	seen := map[string]bool{}
	n := float64(len(x.docLen))
	avg := float64(x.total) / n
	if avg == 0 {
		avg = 1
	}
	scores := map[string]float64{}
	for _, term := range Terms(query) {
		for _, t := range Tokens(term) {
			if seen[t] {
				continue
			}
			seen[t] = true
			p := x.postings[t]
			if len(p) == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(len(p))+0.5)/(float64(len(p))+0.5))
			for id, tf := range p {
				f := float64(tf)
				scores[id] += idf * f * (BM25K1 + 1) / (f + BM25K1*(1-BM25B+BM25B*float64(x.docLen[id])/avg))
			}
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
