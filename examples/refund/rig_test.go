package refund_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/examples/refund"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

// eachBackend runs fn on the embedded backend and on PostgreSQL.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, mk := range []func(*testing.T) backend{sqliteBackend, postgresBackend} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// rig is the refund workflow in the test process over one backend: the
// engine's stores, the payments service behind an HTTP server, and an
// operation ledger on a controlled clock (approval expiry).
type rig struct {
	t     *testing.T
	b     backend
	e     *memento.Engine
	pay   *refund.Client
	ops   *toolop.Service
	clock *testenv.Clock // the ledger's (approval expiry)
	svc   refund.Services
}

func newRig(t *testing.T, b backend) *rig {
	t.Helper()
	p, err := refund.OpenPayments(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	e := b.open(t)
	t.Cleanup(func() { _ = e.Close() })
	c := testenv.NewClock(time.Now())
	r := &rig{t: t, b: b, e: e, pay: refund.NewClient(srv.URL), ops: toolop.NewService(e.Ops.Store(), c.Now), clock: c, svc: services(e)}
	if err := refund.SetupPolicy(t.Context(), e.Retrieval, "default"); err != nil {
		t.Fatal(err)
	}
	return r
}

// engine is a refund worker named owner.
func (r *rig) engine(owner string, opts workflow.Options, wo refund.Options) *workflow.Engine {
	r.t.Helper()
	opts.Owner = owner
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 5 * time.Second
	}
	opts.RetryBackoff = time.Millisecond
	eng := workflow.New(r.e.Runs, r.ops, opts)
	if err := eng.RegisterTool(refund.Tool(r.pay)); err != nil {
		r.t.Fatal(err)
	}
	if err := eng.Register(refund.Workflow(r.pay, r.svc, wo)); err != nil {
		r.t.Fatal(err)
	}
	return eng
}

// start records the order's dialog and creates its run.
func (r *rig) start(eng *workflow.Engine, orderID string) string {
	r.t.Helper()
	o, _ := refund.OrderFor(orderID)
	if err := refund.OpenDialog(r.t.Context(), r.e.Sessions, "default", o); err != nil {
		r.t.Fatal(err)
	}
	if _, _, err := eng.Start(r.t.Context(), refund.WorkflowName, refund.RunID(orderID), refund.Input{OrderID: orderID}); err != nil {
		r.t.Fatal(err)
	}
	return refund.RunID(orderID)
}

// state decodes the run's state.
func (r *rig) state(runID string) runState {
	r.t.Helper()
	got, err := r.e.Runs.Get(r.t.Context(), "default", runID)
	if err != nil {
		r.t.Fatal(err)
	}
	var st runState
	if err := json.Unmarshal(got.State, &st); err != nil {
		r.t.Fatalf("state of %s: %v", runID, err)
	}
	st.Run = got
	return st
}

// runState is a refund run's state, as the tests read it.
type runState struct {
	Run        run.Run            `json:"-"`
	Order      refund.Order       `json:"order"`
	Dialog     refund.DialogRef   `json:"dialog"`
	Policy     refund.PolicyRef   `json:"policy"`
	Preference *refund.Preference `json:"preference"`
	Candidate  *struct {
		Key   string  `json:"key"`
		Value string  `json:"value"`
		Seqs  []int64 `json:"seqs"`
	} `json:"preference_candidate"`
	Remembered *refund.Remembered `json:"remembered"`
	Decision   refund.Decision    `json:"decision"`
	Outcome    string             `json:"outcome"`
	Refund     map[string]string  `json:"refund"`
}

// truth is everything the sources of truth hold about a run: the run
// record, every event, its operations and approvals, and the payments
// ledger.
type truth struct {
	Run       run.Run
	Events    []run.Event
	Ops       []toolop.Operation
	Approvals []toolop.Approval
	Ledger    []refund.Refund
}

func (r *rig) truth(runID string) truth {
	r.t.Helper()
	ctx := context.Background()
	got, err := r.e.Runs.Get(ctx, "default", runID)
	if err != nil {
		r.t.Fatal(err)
	}
	ops, err := r.e.Ops.List(ctx, "default", runID)
	if err != nil {
		r.t.Fatal(err)
	}
	aps, err := r.e.Ops.ListApprovals(ctx, "default", runID)
	if err != nil {
		r.t.Fatal(err)
	}
	ledger, err := r.pay.Refunds(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return truth{got, events(r.t, r.e, runID), ops, aps, ledger}
}

// sameTruth fails unless the run, its events (with the fields JSON leaves
// out: state, chain, spend), the ledger and the approvals are as before.
func (r *rig) sameTruth(before truth, what string) {
	r.t.Helper()
	after := r.truth(before.Run.RunID)
	if !reflect.DeepEqual(before, after) {
		r.t.Fatalf("%s changed a source of truth:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// exec runs one statement on the backend behind the stores' back, as
// corruption or a stray write would ("?" placeholders on both backends).
func (r *rig) exec(query string, args ...any) int64 {
	r.t.Helper()
	ctx := context.Background()
	if r.b.cfg.PostgresURL == "" {
		db, err := sqlite.OpenDir(ctx, r.b.cfg.DataDir)
		if err != nil {
			r.t.Fatal(err)
		}
		defer db.Close()
		res, err := db.SQL().ExecContext(ctx, query, args...)
		if err != nil {
			r.t.Fatalf("%s: %v", query, err)
		}
		n, _ := res.RowsAffected()
		return n
	}
	db, err := postgres.Open(ctx, r.b.cfg.PostgresURL)
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	for i := 1; strings.Contains(query, "?"); i++ {
		query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
	}
	tag, err := db.Pool().Exec(ctx, query, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", query, err)
	}
	return tag.RowsAffected()
}

// rewriteSummary edits a stored summary in place, keeping its id, range
// and source digest: what a lossy rewrite of the cache looks like.
func (r *rig) rewriteSummary(id string, edit func(s *compact.Summary)) {
	r.t.Helper()
	s, err := r.e.Summaries.Get(context.Background(), "default", id)
	if err != nil {
		r.t.Fatal(err)
	}
	edit(&s)
	body, err := json.Marshal(s)
	if err != nil {
		r.t.Fatal(err)
	}
	if n := r.exec(`UPDATE summaries SET body = ? WHERE tenant_id = ? AND summary_id = ?`, string(body), "default", id); n != 1 {
		r.t.Fatalf("rewrite summary %s: %d rows", id, n)
	}
}

// dropDetails removes from a summary what the decision relies on: the
// amount, the negations ("never arrived") and every line naming them.
func dropDetails(s *compact.Summary) {
	s.Carried.Amounts, s.Carried.Negations = nil, nil
	kept := s.Facts[:0]
	for _, f := range s.Facts {
		if !strings.Contains(f.Text, "never") && !strings.Contains(f.Text, "EUR") {
			kept = append(kept, f)
		}
	}
	s.Facts = kept
	s.Text = "Summary of the dialog: the customer chatted about a parcel."
}
