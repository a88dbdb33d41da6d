package sqlite

import (
	"context"
	"database/sql"
)

// RecoverableSQL is the recovery poll's statement, for the test of its plan.
const RecoverableSQL = recoverableSQL

// WriteTx is writeTx, for the test of a transaction whose context ends
// midway.
func (db *DB) WriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.writeTx(ctx, fn)
}
