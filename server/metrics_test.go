package server_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
)

// TestMetrics: /metrics counts commits, commit conflicts by kind, and
// requests by route pattern.
func TestMetrics(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	ctx := context.Background()
	r, l := e.leasedRun(t, "m")
	if _, err := e.c.Commit(ctx, r.RunID, commitReq(1, l, "a", `{}`)); err != nil {
		t.Fatal(err)
	}
	_, _ = e.c.Commit(ctx, r.RunID, commitReq(1, l, "b", `{}`)) // stale revision
	_, _ = e.c.Commit(ctx, r.RunID, commitReq(1, l, "c", `{}`)) // stale revision
	stale := l
	stale.Epoch = 9
	_, _ = e.c.Commit(ctx, r.RunID, commitReq(2, stale, "d", `{}`)) // lease lost

	res := e.do(t, "GET", "/metrics", nil, nil)
	body := string(res.body)
	want := map[string]float64{
		`memento_run_commits_total`:                                                                       1,
		`memento_run_commit_conflicts_total{kind="revision"}`:                                             2,
		`memento_run_commit_conflicts_total{kind="lease"}`:                                                1,
		`memento_run_commit_conflicts_total{kind="transition"}`:                                           0,
		`memento_http_requests_total{route="POST /v1/runs/{run_id}/commit",status="409"}`:                 3,
		`memento_http_requests_total{route="POST /v1/runs/{run_id}/commit",status="200"}`:                 1,
		`memento_http_request_duration_seconds_count{route="POST /v1/runs/{run_id}/commit",status="200"}`: 1,
	}
	for series, v := range want {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Errorf("metric %s missing", series)
			continue
		}
		if got, _ := strconv.ParseFloat(m[1], 64); got != v {
			t.Errorf("metric %s = %v, want %v", series, got, v)
		}
	}
}
