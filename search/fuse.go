package search

import (
	"math"
	"sort"
	"time"
)

// Ranked is an id with its score in one ranking, best first in a list.
type Ranked struct {
	ID    string
	Score float64
}

// Fused is an id after fusion: its fused score and, per input list, its
// 1-based rank and score there (0 when absent).
type Fused struct {
	ID     string
	Score  float64
	Ranks  []int
	Scores []float64
}

// RRFK is the usual reciprocal-rank-fusion constant (Cormack et al. 2009).
const RRFK = 60

// LexicalVectorWeight is the fusion weight of a vector list whose embedder
// is lexical (IsLexical: it knows words and spellings, no meanings, as the
// offline hashing embedder). Such vectors know nothing full text does not,
// except near spellings, so they fill in after it rather than vote beside
// it: at this weight a vector-only hit ranks after every full-text hit of
// the first few hundred ranks (1e-4/(RRFK+1) < 1/(RRFK+400)^2), and the
// vectors only order what full text leaves tied.
const LexicalVectorWeight = 1e-4

// IsLexical reports whether an embedder says its vectors are lexical, by a
// method Lexical() bool.
func IsLexical(embedder any) bool {
	l, ok := embedder.(interface{ Lexical() bool })
	return ok && l.Lexical()
}

// RRF fuses ranked lists by reciprocal rank: score = Σ w_i / (k + rank_i).
// weights, when shorter than lists, count 1 for the rest. Ties break by id
// so the order is deterministic.
func RRF(k int, weights []float64, lists ...[]Ranked) []Fused {
	if k <= 0 {
		k = RRFK
	}
	byID := map[string]*Fused{}
	var order []*Fused
	for li, l := range lists {
		w := 1.0
		if li < len(weights) {
			w = weights[li]
		}
		for r, h := range l {
			f := byID[h.ID]
			if f == nil {
				f = &Fused{ID: h.ID, Ranks: make([]int, len(lists)), Scores: make([]float64, len(lists))}
				byID[h.ID] = f
				order = append(order, f)
			}
			if f.Ranks[li] != 0 {
				continue // a list naming an id twice counts its best rank
			}
			f.Ranks[li] = r + 1
			f.Scores[li] = h.Score
			f.Score += w / float64(k+r+1)
		}
	}
	out := make([]Fused, len(order))
	for i, f := range order {
		out[i] = *f
	}
	SortFused(out)
	return out
}

// SortFused orders by score descending, then id.
func SortFused(fs []Fused) {
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].Score != fs[j].Score {
			return fs[i].Score > fs[j].Score
		}
		return fs[i].ID < fs[j].ID
	})
}

// Decay is the recency weight of something of time at, seen at now, with
// the given half-life: 1 for now, 0.5 one half-life ago. A zero half-life
// or a future time weighs 1.
func Decay(at, now time.Time, halfLife time.Duration) float64 {
	if halfLife <= 0 || !at.Before(now) {
		return 1
	}
	return math.Exp2(-float64(now.Sub(at)) / float64(halfLife))
}
