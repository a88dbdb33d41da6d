package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mementohq/memento/search"
)

// Search modes.
const (
	ModeHybrid   = "hybrid"
	ModeFulltext = "fulltext"
	ModeVector   = "vector"
)

// SearchQuery is one search of a subject's memory.
type SearchQuery struct {
	Query     string
	SubjectID string
	Namespace string
	K         int
	Mode      string // "" is hybrid
	// HalfLife, when > 0, weighs each hit by 0.5^(age/HalfLife), age from
	// the claim's valid_from: the caller turns recency on.
	HalfLife time.Duration
	// DistinctMessages drops a hit whose provenance message_ids are all
	// named by better hits (a turn inside a window already returned), so
	// the k hits carry k distinct pieces of evidence.
	DistinctMessages bool
}

// Hit is a claim found by search, with its score and the parts it came from.
type Hit struct {
	Claim
	Score float64    `json:"score"`
	Parts ScoreParts `json:"score_parts"`
}

// ScoreParts says how a hit was ranked: its rank and score in each list
// (0 when absent), the fused score and the recency weight.
type ScoreParts struct {
	FulltextRank  int     `json:"fulltext_rank"`
	FulltextScore float64 `json:"fulltext_score"`
	VectorRank    int     `json:"vector_rank"`
	VectorScore   float64 `json:"vector_score"`
	Fused         float64 `json:"fused"`
	Recency       float64 `json:"recency"`
	Mode          string  `json:"mode"`
}

// SearchResult is the answer of Search: the hits and the mode that ran
// (hybrid without an embedder runs full text only, and says so).
type SearchResult struct {
	Items []Hit  `json:"items"`
	Mode  string `json:"mode"`
	Model string `json:"embedding_model,omitempty"`
}

// Search ranks the subject's live claims by full text, vectors or both
// (reciprocal rank fusion), filtered by tenant, subject, namespace and
// validity before ranking; every hit is re-checked against the store.
func (s *Service) Search(ctx context.Context, tenantID string, q SearchQuery) (SearchResult, error) {
	if err := checkID("subject_id", q.SubjectID); err != nil {
		return SearchResult{}, err
	}
	if q.Namespace != "" {
		if err := checkID("namespace", q.Namespace); err != nil {
			return SearchResult{}, err
		}
		q.Namespace = NormalizeNamespace(q.Namespace)
	}
	if strings.TrimSpace(q.Query) == "" || len(q.Query) > MaxQueryBytes || !utf8.ValidString(q.Query) {
		return SearchResult{}, fmt.Errorf("%w: query must be non-empty UTF-8 of at most %d bytes", ErrInvalidInput, MaxQueryBytes)
	}
	if q.K < 0 || q.K > MaxSearchK {
		return SearchResult{}, fmt.Errorf("%w: k must be within [1, %d]", ErrInvalidInput, MaxSearchK)
	}
	if q.K == 0 {
		q.K = DefaultSearchK
	}
	if q.HalfLife < 0 {
		return SearchResult{}, fmt.Errorf("%w: half-life must not be negative", ErrInvalidInput)
	}
	mode := q.Mode
	if mode == "" {
		mode = s.opts.DefaultMode
	}
	switch mode {
	case "":
		mode = ModeHybrid
	case ModeHybrid, ModeFulltext, ModeVector:
	default:
		return SearchResult{}, fmt.Errorf("%w: mode must be hybrid, fulltext or vector", ErrInvalidInput)
	}
	if s.opts.Embedder == nil {
		if mode == ModeVector {
			return SearchResult{}, fmt.Errorf("%w: vector search needs an embedder, and none is configured", ErrInvalidInput)
		}
		mode = ModeFulltext
	}
	res := SearchResult{Mode: mode, Items: []Hit{}}
	var qv []float32
	if s.opts.Embedder != nil {
		res.Model = s.opts.Embedder.Model()
	}
	if mode != ModeFulltext {
		var err error
		if qv, err = s.index.embedQuery(ctx, q.Query); err != nil {
			return SearchResult{}, fmt.Errorf("search memories of subject %s: %w", q.SubjectID, err)
		}
	}
	n := max(q.K*3, 30)
	for round := 0; round < 2; round++ {
		hits, removed, err := s.searchOnce(ctx, tenantID, q, qv, mode, n)
		if err != nil {
			return SearchResult{}, err
		}
		if len(hits) >= q.K || removed == 0 {
			if len(hits) > q.K {
				hits = hits[:q.K]
			}
			res.Items = hits
			return res, nil
		}
		n *= 4 // candidates the store no longer serves crowded the rest out: once more, wider
		res.Items = hits
	}
	return res, nil
}

// searchOnce ranks n candidates per list in the subject's in-process
// indexes, fuses, re-checks against the store and weighs them.
// removed counts candidates the store no longer serves, and those
// DistinctMessages dropped.
func (s *Service) searchOnce(ctx context.Context, tenantID string, q SearchQuery, qv []float32, mode string, n int) ([]Hit, int, error) {
	now := s.now()
	var weights []float64
	if search.IsLexical(s.opts.Embedder) {
		weights = []float64{1, search.LexicalVectorWeight}
	}
	fuse := func(text, vecs []search.Ranked) []search.Fused {
		fused := search.RRF(search.RRFK, weights, text, vecs)
		if len(fused) > n {
			fused = fused[:n]
		}
		return fused
	}
	e := s.index.entry(tenantID, q.SubjectID)
	fused, claims, ok, err := s.index.rankAndGet(ctx, e, q, qv, mode, n, now, fuse)
	if err != nil {
		return nil, 0, fmt.Errorf("search memories of subject %s: %w", q.SubjectID, err)
	}
	if !ok {
		text, vecs, err := s.index.rank(ctx, e, q, qv, mode, n, now)
		if err != nil {
			return nil, 0, fmt.Errorf("search memories of subject %s: %w", q.SubjectID, err)
		}
		fused = fuse(text, vecs)
		if claims, err = s.store.GetMany(ctx, tenantID, fusedIDs(fused)); err != nil {
			return nil, 0, fmt.Errorf("re-check search hits: %w", err)
		}
	}
	byID := make(map[string]Claim, len(claims))
	for _, c := range claims {
		byID[c.MemoryID] = c
	}
	hits := make([]Hit, 0, len(fused))
	removed := 0
	for _, f := range fused {
		c, ok := byID[f.ID]
		if !ok || !c.Live(now) || c.SubjectID != q.SubjectID || (q.Namespace != "" && c.Namespace != q.Namespace) {
			removed++
			s.index.remove(tenantID, q.SubjectID, f.ID)
			continue
		}
		h := Hit{Claim: c, Parts: ScoreParts{FulltextRank: f.Ranks[0], FulltextScore: f.Scores[0], VectorRank: f.Ranks[1], VectorScore: f.Scores[1], Fused: f.Score, Recency: 1, Mode: mode}}
		h.Score = f.Score
		if q.HalfLife > 0 {
			h.Parts.Recency = search.Decay(c.ValidFrom, now, q.HalfLife)
			h.Score *= h.Parts.Recency
		}
		hits = append(hits, h)
	}
	if q.HalfLife > 0 {
		slices.SortFunc(hits, func(a, b Hit) int {
			if c := cmp.Compare(b.Score, a.Score); c != 0 {
				return c
			}
			return strings.Compare(a.MemoryID, b.MemoryID)
		})
	}
	if q.DistinctMessages {
		kept := dropCovered(hits)
		removed += len(hits) - len(kept) // so Search widens when too few are left
		hits = kept
	}
	return hits, removed, nil
}
