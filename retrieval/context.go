package retrieval

import (
	"context"

	"github.com/mementohq/memento/contextbuild"
)

var _ contextbuild.Retriever = ContextSource{}

// ContextSource lets the context builder retrieve documents through a
// Service; every build's retrieval is stored as a snapshot like any other.
type ContextSource struct{ Service *Service }

// Retrieve implements contextbuild.Retriever.
func (c ContextSource) Retrieve(ctx context.Context, tenantID, principal, query string, k int) (contextbuild.Retrieved, error) {
	snap, err := c.Service.Retrieve(ctx, tenantID, RetrieveRequest{Query: query, Principal: principal, K: min(max(k, 1), MaxK)})
	if err != nil {
		return contextbuild.Retrieved{}, err
	}
	out := make([]contextbuild.Document, len(snap.Hits))
	for i, h := range snap.Hits {
		out[i] = contextbuild.Document{ChunkID: h.ChunkID, Text: h.Text}
	}
	return contextbuild.Retrieved{SnapshotID: snap.SnapshotID, Documents: out}, nil
}
