package refund_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/mementohq/memento/client"
)

// TestManualApprovalViaAPI: with --manual-approvals the demo waits for a
// person; a `memento serve` on the same data directory shows the pending
// approval and takes the decision over HTTP; the demo then finishes.
func TestManualApprovalViaAPI(t *testing.T) {
	b := sqliteBackend(t)
	_, url := startPayments(t, t.TempDir()+"/ledger.jsonl")
	demo := start(t, nil, demoArgs(url, b, 1, "--manual-approvals")...)
	srv := start(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", b.args[1], "--log-format", "text")
	if !waitFor(srv, srv.errb, "msg=listening", 30*time.Second) {
		t.Fatalf("server did not start: %s", srv.errb)
	}
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(srv.errb.String())
	if addr == nil {
		t.Fatalf("no address in %s", srv.errb)
	}
	c, err := client.New("http://" + addr[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var pending []client.Approval
	deadline := time.Now().Add(60 * time.Second)
	for len(pending) == 0 {
		if time.Now().After(deadline) || demo.exited() {
			t.Fatalf("no approval requested; demo stderr: %s", tail(demo.errb.String(), 2000))
		}
		as, err := c.Approvals(ctx, crashRun)
		if err == nil {
			for _, a := range as {
				if a.EffectiveStatus == "pending" {
					pending = append(pending, a)
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // polling another process's progress
	}
	r, err := c.GetRun(ctx, crashRun)
	if err != nil || r.Status != "suspended" {
		t.Fatalf("run while waiting: %+v %v", r, err)
	}
	if rs := refunds(t, url); len(rs) != 0 {
		t.Fatalf("refunded before approval: %+v", rs)
	}
	if _, err := c.DecideApproval(ctx, pending[0].ApprovalID, true, "manager", "customer is right"); err != nil {
		t.Fatal(err)
	}
	if err := demo.wait(t, 60*time.Second); err != nil {
		t.Fatalf("demo exited with %v: %s", err, tail(demo.errb.String(), 2000))
	}
	sum := lastLineSummary(t, demo)
	if sum.RunsByStatus["completed"] != 1 || sum.RefundsApplied[crashOrder] != 1 {
		t.Fatalf("summary: %+v", sum)
	}
}
