package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func testRedisURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("MEMENTO_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opts, err := goredis.ParseURL(u)
	if err != nil {
		tb.Fatalf("MEMENTO_TEST_REDIS_URL: %v", err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("Redis is required (MEMENTO_TEST_REDIS_URL=%s): %v", u, err)
	}
	return u
}

// TestRunSessionsSmoke runs the benchmark briefly and checks the shape of the
// report and that it leaves no key behind; it asserts nothing about speed.
func TestRunSessionsSmoke(t *testing.T) {
	url := testRedisURL(t)
	rep, err := RunSessions(t.Context(), SessionsConfig{RedisURL: url, Duration: 60 * time.Millisecond, Warmup: -1, Rounds: 2, Concurrency: []int{1, 3}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(rep.Results) != len(SessionOps)*2*2 || len(rep.Ratios) != len(SessionOps)*2 {
		t.Fatalf("%d results, %d ratios", len(rep.Results), len(rep.Ratios))
	}
	for _, m := range rep.Results {
		if m.OpsPerSec <= 0 || len(m.Rounds) != 2 || m.P50 <= 0 || m.P99 < m.P50 {
			t.Fatalf("measurement %+v", m)
		}
	}
	for _, r := range rep.Ratios {
		if r.Value <= 0 || r.Goal != goalOf(strings.TrimSuffix(r.Name, " memento/floor")) {
			t.Fatalf("ratio %+v", r)
		}
	}
	if !rep.Redaction || rep.StateBytes < 200 || rep.RedisVersion == "" {
		t.Fatalf("report header: %+v", rep)
	}
	var buf bytes.Buffer
	rep.WriteTable(&buf)
	for _, want := range []string{"append  memento  3", "patch   floor    1", "≥0.70"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, buf.String())
		}
	}
	opts, _ := goredis.ParseURL(url)
	c := goredis.NewClient(opts)
	defer c.Close()
	if keys, err := c.Keys(t.Context(), rep.KeyPrefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys left under %s: %d (%v)", rep.KeyPrefix, len(keys), err)
	}
}

func TestPercentiles(t *testing.T) {
	var xs []time.Duration
	for i := 100; i >= 1; i-- {
		xs = append(xs, time.Duration(i))
	}
	if p50, p99 := percentiles(xs); p50 != 50 || p99 != 99 {
		t.Fatalf("p50 %v p99 %v, want 50 and 99", p50, p99)
	}
	if p50, p99 := percentiles(nil); p50 != 0 || p99 != 0 {
		t.Fatal("empty")
	}
}
