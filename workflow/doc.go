// Package workflow is a Go SDK for crash-safe agent workflows on top of
// durable runs and the operation ledger: named steps, one commit per step,
// side effects only through the ledger, approvals as waits, enforced budgets,
// and a recovery loop so several worker processes can serve one store.
//
// The engine keeps its control record (attempts, spend, approvals, waits)
// in the run's state under the reserved member "_memento"; a state JSON
// Schema that closes the object (additionalProperties false) must declare
// it, e.g. "_memento": {"type": "object"}.
package workflow
