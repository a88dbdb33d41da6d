package compact

import (
	"context"
	"fmt"

	"github.com/mementohq/memento/contextbuild"
)

// ContextSource gives the context builder the usable (verified, contiguous)
// summaries of a run or session.
type ContextSource struct{ S *Service }

var _ contextbuild.Summaries = ContextSource{}

// Verified returns the owner's usable summaries: the chain (Chain), each
// one verified, cut before the first that fails.
func (c ContextSource) Verified(ctx context.Context, tenantID, ownerKind, ownerID, userID string) ([]contextbuild.Summary, error) {
	owner := RunOwner(ownerID)
	if ownerKind == string(OwnerSession) {
		owner = SessionOwner(ownerID, userID)
	}
	sums, err := c.S.Usable(ctx, tenantID, owner)
	if err != nil {
		return nil, fmt.Errorf("usable summaries: %w", err)
	}
	out := make([]contextbuild.Summary, len(sums))
	for i, s := range sums {
		out[i] = contextbuild.Summary{ID: s.SummaryID, FromSeq: s.Covers.FromSeq, ToSeq: s.Covers.ToSeq, Text: s.Text}
	}
	return out, nil
}
