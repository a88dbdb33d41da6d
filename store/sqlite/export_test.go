package sqlite

// RecoverableSQL is the recovery poll's statement, for the test of its plan.
const RecoverableSQL = recoverableSQL
