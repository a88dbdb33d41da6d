package refund

import (
	"context"
	"errors"
	"fmt"

	"github.com/mementohq/memento/retrieval"
)

// The refund policy is an outside document the workflow retrieves: support
// staff and the refund agent may read it, a customer may not.
const (
	PolicyDocumentID = "refund-policy"
	PolicySourceURI  = "https://support.example/policies/refunds"
	SupportGroup     = "support"
	// AgentPrincipal is who the workflow retrieves as.
	AgentPrincipal = "agent:refund-bot"
	// PolicyQuery is what the workflow asks retrieval.
	PolicyQuery = "refund policy for a parcel reported lost"
)

// PolicyV1 is the policy the demo starts with.
const PolicyV1 = "Refund policy. A parcel reported lost by the customer, with no carrier scan for ten days, " +
	"is refunded in full to the original payment method. Store credit is offered only when the customer asks for it. " +
	"Refunds above 150.00 EUR need a manager's approval."

// PolicyACL is who may read the policy.
var PolicyACL = []string{retrieval.GroupPrefix + SupportGroup}

// PolicyRef is the state field "policy": the provenance of the policy text
// the decision relied on. The text itself stays in the retrieval snapshot.
type PolicyRef struct {
	SnapshotID    string `json:"snapshot_id"`
	DocumentID    string `json:"document_id"`
	SourceURI     string `json:"source_uri"`
	SourceVersion string `json:"source_version"`
	ChunkID       string `json:"chunk_id"`
	ContentDigest string `json:"content_digest"`
}

// PutPolicy indexes a version of the refund policy with its ACL.
func PutPolicy(ctx context.Context, ret *retrieval.Service, tenantID, sourceVersion, text string) (retrieval.Document, error) {
	d, _, err := ret.Put(ctx, tenantID, retrieval.PutRequest{DocumentID: PolicyDocumentID, SourceURI: PolicySourceURI,
		SourceVersion: sourceVersion, Content: text, ACL: PolicyACL})
	if err != nil {
		return d, fmt.Errorf("put refund policy %s: %w", sourceVersion, err)
	}
	return d, nil
}

// SetupPolicy makes the refund agent a member of the support group and
// indexes PolicyV1 unless a policy is indexed already (a later version
// stays). Every demo start calls it; it is idempotent.
func SetupPolicy(ctx context.Context, ret *retrieval.Service, tenantID string) error {
	if _, err := ret.SetMember(ctx, tenantID, SupportGroup, AgentPrincipal, true); err != nil {
		return fmt.Errorf("refund agent membership: %w", err)
	}
	_, err := ret.Get(ctx, tenantID, PolicyDocumentID)
	if errors.Is(err, retrieval.ErrNotFound) {
		_, err = PutPolicy(ctx, ret, tenantID, "v1", PolicyV1)
	}
	return err
}

// retrievePolicy retrieves the policy as the agent and returns its
// provenance and text; ok is false when the agent can read no policy.
func retrievePolicy(ctx context.Context, ret *retrieval.Service, tenantID string) (PolicyRef, bool, error) {
	snap, err := ret.Retrieve(ctx, tenantID, retrieval.RetrieveRequest{Query: PolicyQuery, Principal: AgentPrincipal, K: 3})
	if err != nil {
		return PolicyRef{}, false, fmt.Errorf("retrieve refund policy: %w", err)
	}
	for _, h := range snap.Hits {
		if h.DocumentID == PolicyDocumentID {
			return PolicyRef{SnapshotID: snap.SnapshotID, DocumentID: h.DocumentID, SourceURI: h.SourceURI, SourceVersion: h.SourceVersion,
				ChunkID: h.ChunkID, ContentDigest: h.ContentDigest}, true, nil
		}
	}
	return PolicyRef{SnapshotID: snap.SnapshotID}, false, nil
}

// policyText reads the policy chunk the run retrieved from its snapshot,
// checking it against the digest the run recorded.
func policyText(ctx context.Context, ret *retrieval.Service, tenantID string, ref PolicyRef) (string, error) {
	snap, err := ret.Snapshot(ctx, tenantID, ref.SnapshotID)
	if err != nil {
		return "", err
	}
	for _, h := range snap.Hits {
		if h.ChunkID == ref.ChunkID {
			if retrieval.Digest(h.Text) != ref.ContentDigest {
				return "", fmt.Errorf("policy chunk %s of snapshot %s does not match its digest", ref.ChunkID, ref.SnapshotID)
			}
			return h.Text, nil
		}
	}
	return "", fmt.Errorf("snapshot %s holds no chunk %s", ref.SnapshotID, ref.ChunkID)
}
