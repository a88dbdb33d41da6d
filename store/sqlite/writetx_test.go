package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"
)

// TestWriteTxEndedMidway: a write whose context ends during its
// transaction (a request past its deadline) fails with the context's
// error, which the API answers as a timeout, and writes nothing.
// database/sql rolls such a transaction back when the context ends; what
// the transaction saw then (sql.ErrTxDone from Commit, "sql: statement is
// closed" from a statement prepared in it) was answered 500 internal.
func TestWriteTxEndedMidway(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after runs once the transaction was rolled back; its error is fn's.
		after func(st *sql.Stmt) error
	}{
		{"before the commit", func(*sql.Stmt) error { return nil }},
		{"before a prepared statement", func(st *sql.Stmt) error { _, err := st.ExecContext(context.Background()); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTemp(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			err := db.WriteTx(ctx, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO memory_namespaces (tenant_id, namespace, personal, sensitive, ttl_us) VALUES ('t', 'ended', 0, 0, 0)`); err != nil {
					return err
				}
				st, err := tx.PrepareContext(ctx, `SELECT 1`)
				if err != nil {
					return err
				}
				cancel()
				// Wait until database/sql has rolled the transaction back.
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
					if _, err := tx.ExecContext(context.Background(), `SELECT 1`); errors.Is(err, sql.ErrTxDone) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the transaction was not rolled back 10s after its context ended")
					}
				}
				return tc.after(st)
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("writeTx whose context ended: %v, want the context's error", err)
			}
			if n := countRows(t, db, "memory_namespaces"); n != 0 {
				t.Fatalf("%d rows written by a transaction whose context ended", n)
			}
		})
	}
}
