package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func testPostgresURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("MEMENTO_TEST_POSTGRES_URL")
	if u == "" {
		u = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		tb.Fatalf("PostgreSQL is required (MEMENTO_TEST_POSTGRES_URL=%s): %v", redactURL(u), err)
	}
	_ = conn.Close(ctx)
	return u
}

// The whole benchmark, briefly: every target commits, every ratio is
// computed, and the guard of the floor never refuses (a refused floor
// commit would be an error, not a fast no-op).
func TestRunCommitSmoke(t *testing.T) {
	u := testPostgresURL(t)
	var progress strings.Builder
	rep, err := RunCommit(context.Background(), CommitConfig{
		PostgresURL: u,
		Duration:    150 * time.Millisecond,
		Warmup:      20 * time.Millisecond,
		Slice:       50 * time.Millisecond,
		Rounds:      2,
		Concurrency: []int{1, 4},
		Peer:        PeerConfig{Skip: true},
		Progress:    &progress,
	})
	if err != nil {
		t.Fatalf("RunCommit: %v\n%s", err, progress.String())
	}
	targets := []string{TargetPostgresFloor, TargetPostgresEngine, TargetPostgresHTTP, TargetSQLiteFloor, TargetSQLiteEngine}
	for _, name := range targets {
		for _, c := range []int{1, 4} {
			v, ok := rep.Lookup(name, c)
			if !ok || v <= 0 {
				t.Errorf("%s at concurrency %d: %v ops/s (found %v)", name, c, v, ok)
			}
		}
	}
	for _, m := range rep.Results {
		if len(m.Rounds) != 2 {
			t.Errorf("%s@%d: %d rounds recorded, want 2", m.Target, m.Concurrency, len(m.Rounds))
		}
	}
	for _, name := range []string{"engine/floor", "http/floor", "sqlite engine/sqlite floor"} {
		for _, c := range []int{1, 4} {
			r, ok := rep.RatioOf(name, c)
			if !ok || r.Value <= 0 {
				t.Errorf("ratio %s at concurrency %d missing or zero: %+v", name, c, r)
			}
		}
	}
	if _, err := os.Stat("memento-data"); err == nil {
		t.Errorf("the benchmark left a memento-data directory in the working directory")
	}
	if _, ok := rep.RatioOf("memento engine/dbos", 1); ok {
		t.Errorf("a DBOS ratio without the peer")
	}
	var table strings.Builder
	rep.WriteTable(&table)
	for _, want := range []string{"postgres floor", "sqlite engine", "engine/floor", "c=4"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// The benchmark leaves no schema behind.
func TestRunCommitDropsItsSchema(t *testing.T) {
	u := testPostgresURL(t)
	ctx := context.Background()
	b, err := openPostgres(ctx, u, 4)
	if err != nil {
		t.Fatal(err)
	}
	schema := b.schema
	steppers, err := b.floor().prepare(ctx, 2)
	if err != nil {
		b.close()
		t.Fatal(err)
	}
	for _, s := range steppers {
		if err := s(ctx); err != nil {
			b.close()
			t.Fatal(err)
		}
	}
	b.close()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s still exists", schema)
	}
}

// A stepper that fails stops the measurement with its error.
func TestMeasureReportsStepperError(t *testing.T) {
	var calls atomic.Int64
	boom := fmt.Errorf("boom")
	s := func(context.Context) error {
		if calls.Add(1) == 5 {
			return boom
		}
		return nil
	}
	_, _, err := measure(context.Background(), []stepper{s, s}, time.Minute)
	if err != boom {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, c := range cases {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestWithPoolSize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?pool_max_conns=16&sslmode=disable"},
		{"postgres://u@h/db?pool_max_conns=3", "postgres://u@h/db?pool_max_conns=3"},
		{"host=h dbname=db", "host=h dbname=db pool_max_conns=16"},
	}
	for _, c := range cases {
		got, err := withPoolSize(c.in, 16)
		if err != nil || got != c.want {
			t.Errorf("withPoolSize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// BenchmarkCommit measures each target at concurrency 1 and 16 with the
// testing package's b.N; `memento bench commit` prints the same targets
// interleaved, with ratios.
func BenchmarkCommit(b *testing.B) {
	u := testPostgresURL(b)
	ctx := context.Background()
	pg, err := openPostgres(ctx, u, 16)
	if err != nil {
		b.Fatal(err)
	}
	defer pg.close()
	h, err := startHTTP(ctx, pg.url)
	if err != nil {
		b.Fatal(err)
	}
	defer h.close()
	sq, err := openSQLite(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer sq.close()
	targets := []target{pg.floor(), pg.engine(), h.target(TargetPostgresHTTP), sq.floor(), sq.engine()}
	for _, c := range DefaultConcurrency {
		for _, t := range targets {
			b.Run(fmt.Sprintf("%s/c=%d", t.name, c), func(b *testing.B) { benchTarget(b, t, c) })
		}
	}
}

func benchTarget(b *testing.B, t target, c int) {
	ctx := context.Background()
	steppers, err := t.prepare(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var failed atomic.Pointer[error]
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, s := range steppers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := s(ctx); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkCommitRatios runs the whole interleaved comparison once per
// iteration (1 round of 2s per target, no DBOS peer: `memento bench commit`
// runs it) and reports the ratios as metrics, e.g. engine/floor@c16.
func BenchmarkCommitRatios(b *testing.B) {
	u := testPostgresURL(b)
	for b.Loop() {
		rep, err := RunCommit(context.Background(), CommitConfig{
			PostgresURL: u, Duration: 2 * time.Second, Rounds: 1, Peer: PeerConfig{Skip: true},
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rep.Ratios {
			b.ReportMetric(r.Value, strings.ReplaceAll(r.Name, " ", "_")+"@c"+fmt.Sprint(r.Concurrency))
		}
	}
}
