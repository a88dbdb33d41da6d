// Package retrieval holds retrieval with provenance: source documents with
// ACLs, their token chunks, ACL-filtered hybrid retrieval, stored snapshots
// that reproduce a run's evidence, and invalidation by event.
package retrieval
