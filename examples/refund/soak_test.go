package refund_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/examples/refund"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

// soakKills reads the number of SIGKILLs from MEMENTO_SOAK_KILLS (default 200).
func soakKills(t *testing.T) int {
	n := 200
	if v := os.Getenv("MEMENTO_SOAK_KILLS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("MEMENTO_SOAK_KILLS=%q: want a positive integer", v)
		}
	}
	return n
}

// TestSoakRandomKills starts two demo workers on one store again and again
// and SIGKILLs each at a random instant, until the kill count is reached
// (adding orders whenever the workers finish everything first). Then one
// worker drives every run to an end, and the invariants are checked: no
// order refunded twice, no run lost, every run completed or suspended with a
// reason, every approved order refunded exactly once, every dialog summary
// a decision read still verifies, one kept preference per customer.
// It runs on both backends; MEMENTO_SOAK_BACKEND=sqlite|postgres picks one.
// Rerun: MEMENTO_SOAK_KILLS=500 go test -v -run TestSoakRandomKills ./examples/refund/
func TestSoakRandomKills(t *testing.T) {
	only := os.Getenv("MEMENTO_SOAK_BACKEND")
	switch only {
	case "", "sqlite", "postgres":
	default:
		t.Fatalf("MEMENTO_SOAK_BACKEND=%q: want sqlite or postgres", only)
	}
	for _, name := range []string{"sqlite", "postgres"} {
		if only != "" && only != name {
			continue
		}
		t.Run(name, func(t *testing.T) {
			b := sqliteBackend(t)
			if name == "postgres" {
				b = postgresBackend(t)
			}
			soak(t, b)
		})
	}
}

func soak(t *testing.T, b backend) {
	if testing.Short() {
		t.Log("short mode: 20 kills")
	}
	target := soakKills(t)
	if testing.Short() {
		target = 20
	}
	_, url := startPayments(t, t.TempDir()+"/ledger.jsonl")
	args := func(orders int) []string {
		return []string{"demo", "refund", "--payments", url, "--orders", fmt.Sprint(orders),
			"--lease-ttl", "400ms", "--poll", "40ms", "--workers", "4", "--log-level", "error", b.args[0], b.args[1]}
	}
	// One uninterrupted start first: it indexes the refund policy, which
	// loads a tokenizer table for a few seconds that no worker killed within
	// half a second would ever finish (a knowledge base is indexed once, not
	// per worker start). Every kill below falls on the refund runs.
	warm := start(t, nil, args(1)...)
	if err := warm.wait(t, 2*time.Minute); err != nil {
		t.Fatalf("warm-up worker exited with %v: %s", err, tail(warm.errb.String(), 3000))
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	orders, kills, cycles, finishedEarly := 30, 0, 0, 0
	began := time.Now()
	for kills < target {
		cycles++
		workers := []*proc{start(t, nil, args(orders)...), start(t, nil, args(orders)...)}
		for _, w := range workers {
			delay := time.Duration(20+rng.IntN(500)) * time.Millisecond
			select {
			case <-w.done:
				if w.waitErr != nil {
					t.Fatalf("worker exited with %v: %s", w.waitErr, tail(w.errb.String(), 3000))
				}
				finishedEarly++
			case <-time.After(delay):
				if !w.exited() {
					w.kill()
					kills++
				}
			}
		}
		for _, w := range workers {
			w.kill()
		}
		if finishedEarly > 0 {
			orders += 20
			finishedEarly = 0
		}
	}
	killPhase := time.Since(began)

	final := start(t, nil, args(orders)...)
	if err := final.wait(t, 5*time.Minute); err != nil {
		t.Fatalf("final worker exited with %v: %s", err, tail(final.errb.String(), 3000))
	}
	sum := lastLineSummary(t, final)

	// Invariants, from the payments ledger and the store.
	byOrder, byKey := map[string]int{}, map[string]int{}
	rs := refunds(t, url)
	for _, rf := range rs {
		byOrder[rf.OrderID]++
		byKey[rf.IdempotencyKey]++
	}
	e := b.open(t)
	defer e.Close()
	ctx := context.Background()
	statuses := map[run.Status]int{}
	customers := map[string]bool{}
	reconciled, resent, resumed := 0, 0, 0
	for i := 1; i <= orders; i++ {
		oid := refund.OrderID(i)
		if byOrder[oid] > 1 {
			t.Errorf("order %s refunded %d times", oid, byOrder[oid])
		}
		r, err := e.Runs.Get(ctx, "default", refund.RunID(oid))
		if err != nil {
			t.Errorf("run of %s lost: %v", oid, err)
			continue
		}
		statuses[r.Status]++
		switch r.Status {
		case run.StatusCompleted:
		case run.StatusSuspended:
			if r.StatusReason == "" {
				t.Errorf("run %s suspended without a reason", r.RunID)
			}
			continue
		default:
			t.Errorf("run %s ended %s: %s", r.RunID, r.Status, r.StatusReason)
			continue
		}
		o, _ := refund.OrderFor(oid)
		// The dialog summaries the decision read still verify, kills or not.
		var st struct {
			Dialog   refund.DialogRef `json:"dialog"`
			Decision refund.Decision  `json:"decision"`
		}
		if err := json.Unmarshal(r.State, &st); err != nil || st.Decision.Context == nil {
			t.Errorf("run %s: state %v, decision %+v", r.RunID, err, st.Decision)
		} else if cs, err := refund.VerifyDialog(ctx, e.Summaries, "default", st.Dialog); err != nil {
			t.Errorf("run %s: verify dialog: %v", r.RunID, err)
		} else {
			for _, c := range cs {
				if !c.OK {
					t.Errorf("run %s: summary %s: %s", r.RunID, c.SummaryID, c.Reason)
				}
			}
		}
		customers[o.Customer] = true
		want := 0
		if o.AmountCents <= 15000 {
			want = 1
		}
		if byOrder[oid] != want {
			t.Errorf("order %s (%d cents) completed with %d refunds, want %d", oid, o.AmountCents, byOrder[oid], want)
		}
		if want == 1 {
			op, err := e.Ops.Get(ctx, "default", toolop.OperationID(r.RunID, refund.BusinessKey(oid)))
			if err != nil || op.Status != toolop.StatusSucceeded {
				t.Errorf("order %s: operation %+v %v, want succeeded", oid, op, err)
			}
			if strings.HasPrefix(op.Resolution, "reconciled") {
				reconciled++
			}
			if op.Attempts > 1 {
				resent++
			}
		}
		for _, ev := range events(t, e, r.RunID) {
			if ev.EventType == resume.EventVerified {
				resumed++
			}
		}
	}
	// However often the remember step was redone, a customer has one
	// current refund-method claim, with the provenance of the dialog that
	// stated it.
	kept := 0
	for c := range customers {
		cs, _, err := e.Memory.List(ctx, "default", memory.Query{SubjectID: c, Namespace: refund.PreferenceNamespace, Key: refund.PreferenceKey})
		if err != nil || len(cs) > 1 {
			t.Errorf("customer %s: %d current refund-method claims %v", c, len(cs), err)
			continue
		}
		if len(cs) == 1 {
			kept++
			if p := cs[0].Provenance; p.ValidatedBy != memory.ValidatedUserConfirmed || p.RunID == "" || p.EventSeq == 0 || len(p.MessageIDs) != 2 {
				t.Errorf("customer %s: provenance %+v", c, p)
			}
		}
	}
	for k, n := range byKey {
		if n > 1 {
			t.Errorf("idempotency key %s applied %d times", k, n)
		}
	}
	for oid := range byOrder {
		if _, err := e.Runs.Get(ctx, "default", refund.RunID(oid)); err != nil {
			t.Errorf("refund for %s without a run: %v", oid, err)
		}
	}
	if len(sum.RunsByStatus) == 0 {
		t.Errorf("empty summary")
	}
	t.Logf("soak (%s): %d SIGKILLs at random instants in %d cycles of 2 workers over %s; %d orders; runs by status %v; "+
		"%d refunds applied, none twice; %d resumes verified; %d refund operations settled by reconciliation after a kill, %d sent again with the same key; "+
		"every dialog summary a decision read verifies; %d customers with one kept preference each",
		b.name, kills, cycles, killPhase.Round(time.Millisecond), orders, statuses, len(rs), resumed, reconciled, resent, kept)
}
