// Package search holds what full-text and vector search share across memory
// and retrieval: query terms, an in-process vector index (exact, and
// approximate past a size), reciprocal rank fusion and recency weighting.
package search
