// Package resume verifies a run before it continues: lease and revision,
// tenant, workflow version and state schema, artifacts and tool contracts,
// event-sequence continuity, reconciliation, approvals and budgets, in order,
// each a named check. A failure refuses: the lease is released and the run
// is left as it was (or, when the caller asks, suspended with the reason).
package resume
