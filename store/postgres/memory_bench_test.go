package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/storetest"
)

// BenchmarkMemorySearchText ranks the full text of 100,000 current claims of
// one subject (beside 1,000 of another). Each query reports its ns/op and
// x-get, its cost over a point read (Get) of one claim measured next to it.
//
//	go test -run '^$' -bench MemorySearchText -benchtime 50x ./store/postgres/
func BenchmarkMemorySearchText(b *testing.B) {
	ctx := context.Background()
	db := openBenchDB(b)
	const n = 100_000
	benchLoad(b, db, storetest.BenchClaims("t", "big", n, 1))
	benchLoad(b, db, storetest.BenchClaims("t", "small", 1000, 2))
	if _, err := db.pool.Exec(ctx, `ANALYZE memory_claims; ANALYZE memory_text`); err != nil {
		b.Fatal(err)
	}
	get := func() {
		if _, err := db.Get(ctx, "t", fmt.Sprintf("mem-big-%07d", n/3)); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range storetest.BenchQueries() {
		b.Run(q.Name, func(b *testing.B) {
			tq := memory.TextQuery{TenantID: "t", SubjectID: "big", Terms: q.Terms, Limit: 20, Now: time.Now()}
			hits, err := db.SearchText(ctx, tq)
			if err != nil || len(hits) == 0 {
				b.Fatalf("search %v: %d hits, %v", q.Terms, len(hits), err)
			}
			base := perOp(b, 500, get) // measured next to the searches: the machine may be busy
			start := time.Now()
			for b.Loop() {
				if _, err := db.SearchText(ctx, tq); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start))/float64(b.N)/float64(base), "x-get")
		})
	}
}

// benchLoad copies claims in as current ones with their full-text rows:
// the rows Insert writes, without its round trips per claim.
func benchLoad(b testing.TB, db *DB, claims []memory.Claim) {
	b.Helper()
	ctx := context.Background()
	rows := make([][]any, len(claims))
	text := make([][]any, len(claims))
	for i, c := range claims {
		rows[i] = []any{c.TenantID, c.MemoryID, c.SubjectID, c.Namespace, c.Key, string(c.Value), 1, c.Text, "{}", 1.0,
			c.ValidFrom, "current", c.ValueDigest, c.CreatedAt, c.ConfirmedAt, int64(i + 1)}
		text[i] = []any{c.TenantID, c.MemoryID, c.SubjectID, c.Namespace, c.Text}
	}
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"memory_claims"}, []string{"tenant_id", "memory_id", "subject_id", "namespace",
			"key", "value", "schema_version", "text", "provenance", "confidence", "valid_from", "status", "value_digest",
			"created_at", "confirmed_at", "version"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"memory_text"}, []string{"tenant_id", "memory_id", "subject_id", "namespace", "text"},
			pgx.CopyFromRows(text)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO memory_subjects (tenant_id, subject_id, version) VALUES ($1, $2, $3)`,
			claims[0].TenantID, claims[0].SubjectID, len(claims))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// perOp is the mean time of n calls of f.
func perOp(b *testing.B, n int, f func()) time.Duration {
	b.Helper()
	start := time.Now()
	for range n {
		f()
	}
	return time.Since(start) / time.Duration(n)
}
