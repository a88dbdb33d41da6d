// Package resume verifies a run before it continues: lease and revision,
// tenant, workflow version and state schema, artifacts and tool contracts,
// event-sequence continuity, reconciliation, approvals and budgets, in order,
// each a named check; a failure refuses and leaves the run suspended with the reason.
package resume
