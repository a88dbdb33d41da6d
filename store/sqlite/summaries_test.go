package sqlite_test

import (
	"testing"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/storetest"
)

func TestSummaryStoreSuite(t *testing.T) {
	storetest.SummaryStoreSuite(t, func(t *testing.T) compact.Store { return openTemp(t).Summaries() })
}

// TestCompactionSuite tampers with events by SQL, behind the store's back.
func TestCompactionSuite(t *testing.T) {
	storetest.CompactionSuite(t, func(t *testing.T) storetest.CompactionBackend {
		db, sessions := openSessions(t)
		return storetest.CompactionBackend{Runs: db, Ops: db, Sessions: sessions, Summaries: db.Summaries(), Retention: true,
			TamperEvent: func(t *testing.T, tenantID, runID string, seq int64, payload string) {
				res, err := db.SQL().ExecContext(t.Context(), `UPDATE run_events SET payload = ? WHERE tenant_id = ? AND run_id = ? AND seq = ?`, payload, tenantID, runID, seq)
				if err != nil {
					t.Fatalf("tamper: %v", err)
				}
				if n, _ := res.RowsAffected(); n != 1 {
					t.Fatalf("tamper: %d rows", n)
				}
			}}
	})
}
