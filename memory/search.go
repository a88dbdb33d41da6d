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
	switch mode {
	case "":
		mode = ModeHybrid
	case ModeHybrid, ModeFulltext, ModeVector:
	default:
		return SearchResult{}, fmt.Errorf("%w: mode must be hybrid, fulltext or vector", ErrInvalidInput)
	}
	if s.vectors == nil {
		if mode == ModeVector {
			return SearchResult{}, fmt.Errorf("%w: vector search needs an embedder, and none is configured", ErrInvalidInput)
		}
		mode = ModeFulltext
	}
	res := SearchResult{Mode: mode, Items: []Hit{}}
	if s.vectors != nil {
		res.Model = s.opts.Embedder.Model()
	}
	n := max(q.K*3, 30)
	for round := 0; round < 2; round++ {
		hits, removed, err := s.searchOnce(ctx, tenantID, q, mode, n)
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
		n *= 4 // stale vectors crowded the candidates out: once more, wider
		res.Items = hits
	}
	return res, nil
}

// searchOnce ranks n candidates per list, fuses, re-checks and weighs them.
// removed counts candidates the store no longer serves, and those
// DistinctMessages dropped.
func (s *Service) searchOnce(ctx context.Context, tenantID string, q SearchQuery, mode string, n int) ([]Hit, int, error) {
	now := s.now()
	var lists [2][]search.Ranked
	if mode != ModeVector {
		scored, err := s.store.SearchText(ctx, TextQuery{TenantID: tenantID, SubjectID: q.SubjectID, Namespace: q.Namespace, Terms: search.Terms(q.Query), Limit: n, Now: now})
		if err != nil {
			return nil, 0, fmt.Errorf("search memories of subject %s: %w", q.SubjectID, err)
		}
		for _, h := range scored {
			lists[0] = append(lists[0], search.Ranked{ID: h.MemoryID, Score: h.Score})
		}
	}
	if mode != ModeFulltext {
		r, err := s.vectors.search(ctx, tenantID, q.SubjectID, q.Namespace, q.Query, n, now)
		if err != nil {
			return nil, 0, fmt.Errorf("search memories of subject %s: %w", q.SubjectID, err)
		}
		lists[1] = r
	}
	fused := search.RRF(search.RRFK, nil, lists[0], lists[1])
	if len(fused) > n {
		fused = fused[:n]
	}
	ids := make([]string, len(fused))
	for i, f := range fused {
		ids[i] = f.ID
	}
	claims, err := s.store.GetMany(ctx, tenantID, ids)
	if err != nil {
		return nil, 0, fmt.Errorf("re-check search hits: %w", err)
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
			if s.vectors != nil {
				s.vectors.remove(tenantID, q.SubjectID, f.ID)
			}
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
