package postgres

// RecoverableSQL is the recovery poll's statement, for the test of its plan.
const RecoverableSQL = recoverableSQL

// RunLookupSQL are the statements that find one run by (tenant_id,
// run_id), for the test of their plans.
var RunLookupSQL = map[string]string{
	"commit":      commitSQL,
	"commit fast": commitFastSQL,
	"lease":       acquireLeaseSQL,
}

// ListRunsQuery is ListRuns' statement, for the test of its plans.
var ListRunsQuery = listRunsQuery
