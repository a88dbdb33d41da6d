package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
)

// TestSummariesHTTP compacts a run's events over HTTP, lists, reads and
// verifies the summary, and checks the refusals, on every backend.
func TestSummariesHTTP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const keyA, keyB = "summaries-key-a-0123456789", "summaries-key-b-0123456789"
		ta, tb := testenv.RandomID("ta-"), testenv.RandomID("tb-")
		e := newEnv(t, backend, envOptions{keys: keyA + "=" + ta + ":writer," + keyB + "=" + tb + ":writer", apiKey: keyA})
		a := map[string]string{"Authorization": "Bearer " + keyA}
		b := map[string]string{"Authorization": "Bearer " + keyB}
		ctx := context.Background()
		schemas := compileOpenAPI(t, e)

		if _, _, err := e.c.CreateRun(ctx, run.CreateRequest{RunID: "sum-1", WorkflowName: "refund", WorkflowVersion: "1", State: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		l, err := e.c.AcquireLease(ctx, "sum-1", "worker", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range []string{
			`{"message":"Refund $120.50 to Alice for order 7731."}`,
			`{"operation_id":"op-7731","tool_name":"payments.refund","status":"started"}`,
			`{"note":"Alice does not want store credit."}`,
		} {
			c := commitReq(int64(i+1), l, "step", `{}`)
			c.Event.Payload = json.RawMessage(p)
			if _, err := e.c.Commit(ctx, "sum-1", c); err != nil {
				t.Fatal(err)
			}
		}

		res := e.do(t, "POST", "/v1/runs/sum-1/summaries", `{"to_seq":2}`, a)
		if res.status != http.StatusCreated {
			t.Fatalf("create: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Summary", res.body)
		var first compact.Summary
		if err := json.Unmarshal(res.body, &first); err != nil {
			t.Fatal(err)
		}
		if res.header.Get("Location") != "/v1/summaries/"+first.SummaryID || first.Covers != (compact.Range{FromSeq: 1, ToSeq: 2}) {
			t.Fatalf("first: %s %+v", res.header.Get("Location"), first.Covers)
		}
		res = e.do(t, "POST", "/v1/runs/sum-1/summaries", `{"compactor":"extractive"}`, a)
		if res.status != http.StatusCreated {
			t.Fatalf("create next: %d %s", res.status, res.body)
		}
		var second compact.Summary
		_ = json.Unmarshal(res.body, &second)
		if second.Covers != (compact.Range{FromSeq: 3, ToSeq: 4}) || second.Previous != first.SummaryID {
			t.Fatalf("second: %+v prev %q", second.Covers, second.Previous)
		}
		if len(second.Carried.Operations) != 1 || second.Carried.Operations[0].OperationID != "op-7731" || len(second.Carried.Negations) != 1 {
			t.Fatalf("carried: %+v", second.Carried)
		}
		// The same range again: the same summary, 200.
		res = e.do(t, "POST", "/v1/runs/sum-1/summaries", `{"from_seq":1,"to_seq":2}`, a)
		if res.status != http.StatusOK || !strings.Contains(string(res.body), first.SummaryID) {
			t.Fatalf("same range: %d %s", res.status, res.body)
		}
		for _, c := range []struct {
			body   string
			status int
			kind   string
		}{
			{`{}`, 409, "summary-range"},
			{`{"from_seq":2,"to_seq":3}`, 409, "summary-range"},
			{`{"compactor":"llm"}`, 422, "invalid-request"},
			{`{"from_seq":-1}`, 422, "invalid-request"},
			{`{"from_seq":"1"}`, 400, "invalid-request"},
			{`{"summary":"x"}`, 400, "invalid-request"},
		} {
			res := e.do(t, "POST", "/v1/runs/sum-1/summaries", c.body, a)
			if res.status != c.status || !strings.HasSuffix(problemType(t, res.body), c.kind) {
				t.Fatalf("%s: %d %s", c.body, res.status, res.body)
			}
		}
		if res := e.do(t, "POST", "/v1/runs/nope/summaries", `{}`, a); res.status != 404 || !strings.HasSuffix(problemType(t, res.body), "run-not-found") {
			t.Fatalf("unknown run: %d %s", res.status, res.body)
		}

		res = e.do(t, "GET", "/v1/runs/sum-1/summaries?limit=1", nil, a)
		schemas.validate(t, "SummaryList", res.body)
		var page struct {
			Items      []compact.Summary `json:"items"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := json.Unmarshal(res.body, &page); err != nil || len(page.Items) != 1 || page.NextCursor == "" {
			t.Fatalf("list page 1: %d %s", res.status, res.body)
		}
		res = e.do(t, "GET", "/v1/runs/sum-1/summaries?limit=1&cursor="+page.NextCursor, nil, a)
		_ = json.Unmarshal(res.body, &page)
		if len(page.Items) != 1 || page.Items[0].SummaryID != second.SummaryID || page.NextCursor != "" {
			t.Fatalf("list page 2: %s", res.body)
		}
		if res := e.do(t, "GET", "/v1/runs/nope/summaries", nil, a); res.status != 404 {
			t.Fatalf("list of an unknown run: %d", res.status)
		}
		if res := e.do(t, "GET", "/v1/runs/sum-1/summaries?cursor=zzz", nil, a); res.status != 422 {
			t.Fatalf("bad cursor: %d %s", res.status, res.body)
		}

		res = e.do(t, "GET", "/v1/summaries/"+first.SummaryID, nil, a)
		if res.status != 200 {
			t.Fatalf("get: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Summary", res.body)
		res = e.do(t, "GET", "/v1/summaries/"+first.SummaryID+"/verify", nil, a)
		schemas.validate(t, "SummaryVerification", res.body)
		var v compact.Verification
		if err := json.Unmarshal(res.body, &v); err != nil || res.status != 200 || !v.OK || !compact.Passed(v.Checked.DigestMatches) || v.Checked.Items != 2 || v.Checked.Next != second.SummaryID {
			t.Fatalf("verify: %d %s", res.status, res.body)
		}
		// Another tenant sees nothing of it.
		for _, p := range []string{"/v1/summaries/" + first.SummaryID, "/v1/summaries/" + first.SummaryID + "/verify"} {
			if res := e.do(t, "GET", p, nil, b); res.status != 404 || !strings.HasSuffix(problemType(t, res.body), "summary-not-found") {
				t.Fatalf("%s from another tenant: %d %s", p, res.status, res.body)
			}
		}
		if res := e.do(t, "GET", "/v1/runs/sum-1/summaries", nil, b); res.status != 404 {
			t.Fatalf("list from another tenant: %d", res.status)
		}
		if res := e.do(t, "POST", "/v1/runs/sum-1/summaries", `{}`, b); res.status != 404 {
			t.Fatalf("compact from another tenant: %d", res.status)
		}
	})
}

func problemType(t *testing.T, body []byte) string {
	t.Helper()
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("not a problem: %s", body)
	}
	return p.Type
}
