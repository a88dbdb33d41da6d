// Package toolop is the operation ledger: every side effect a run causes is
// prepared once under a stable operation id, marked started, then succeeded,
// failed or unknown, and reconciled with the external system before any resend.
// It also keeps approvals (valid only approved, unexpired, for the same request
// digest) and the budgets and control record a workflow keeps inside its run state.
package toolop
