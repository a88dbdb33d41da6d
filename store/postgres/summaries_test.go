package postgres

import (
	"testing"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/storetest"
)

func TestSummaryStoreSuite(t *testing.T) {
	storetest.SummaryStoreSuite(t, func(t *testing.T) compact.Store { return openTestDB(t).Summaries() })
}

// TestCompactionSuite tampers with events by SQL, behind the store's back.
func TestCompactionSuite(t *testing.T) {
	storetest.CompactionSuite(t, func(t *testing.T) storetest.CompactionBackend {
		db := openTestDB(t)
		sessions := NewSessionStore(db, SessionOptions{SweepInterval: -1})
		t.Cleanup(func() { _ = sessions.Close() })
		return storetest.CompactionBackend{Runs: db, Ops: db, Sessions: sessions, Summaries: db.Summaries(), Retention: true,
			TamperEvent: func(t *testing.T, tenantID, runID string, seq int64, payload string) {
				tag, err := db.pool.Exec(t.Context(), `UPDATE run_events SET payload = $1::jsonb WHERE tenant_id = $2 AND run_id = $3 AND seq = $4`, payload, tenantID, runID, seq)
				if err != nil {
					t.Fatalf("tamper: %v", err)
				}
				if tag.RowsAffected() != 1 {
					t.Fatalf("tamper: %d rows", tag.RowsAffected())
				}
			}}
	})
}
