package refund

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
	"github.com/mementohq/memento/workflow/control"
)

// DemoConfig drives N refund runs to an end.
type DemoConfig struct {
	PaymentsURL     string
	Orders          int
	Workers         int
	LeaseTTL        time.Duration
	Poll            time.Duration
	ManualApprovals bool
	ApprovalLimit   int64
	ApprovalTTL     time.Duration
	Tenant          string
	Logger          *slog.Logger
	// Hooks are the engine's test hooks (crash points); zero in production.
	Hooks workflow.Hooks
}

// Summary is what the demo prints as its last line.
type Summary struct {
	RunsByStatus   map[string]int    `json:"runs_by_status"`
	RefundsApplied map[string]int    `json:"refunds_applied"`
	Outcomes       map[string]int    `json:"outcomes"`
	Suspended      map[string]string `json:"suspended,omitempty"`
	Failed         map[string]string `json:"failed,omitempty"`
	Orders         int               `json:"orders"`
}

// RunDemo creates one run per order (idempotently: a restart finds them),
// serves them with a recovery loop until every run is completed, failed or
// suspended for an operator, and summarizes runs and the payments ledger.
func RunDemo(ctx context.Context, svc Services, ops *toolop.Service, cfg DemoConfig) (Summary, error) {
	if cfg.Orders <= 0 {
		return Summary{}, fmt.Errorf("demo refund: --orders must be positive")
	}
	if err := svc.Check(); err != nil {
		return Summary{}, err
	}
	runs := svc.Runs
	if cfg.ApprovalLimit == 0 {
		cfg.ApprovalLimit = 15000
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if err := RegisterSchemas(runs.Registry()); err != nil {
		return Summary{}, err
	}
	pay := NewClient(cfg.PaymentsURL)
	opts := workflow.Options{Tenant: cfg.Tenant, LeaseTTL: cfg.LeaseTTL, Concurrency: cfg.Workers, PollInterval: cfg.Poll, Logger: cfg.Logger, Hooks: cfg.Hooks}
	if !cfg.ManualApprovals {
		opts.Approver = Policy(cfg.ApprovalLimit)
	}
	eng := workflow.New(runs, ops, opts)
	if err := eng.RegisterTool(Tool(pay)); err != nil {
		return Summary{}, err
	}
	if err := eng.Register(Workflow(pay, svc, Options{ApprovalTTL: cfg.ApprovalTTL})); err != nil {
		return Summary{}, err
	}
	if err := SetupPolicy(ctx, svc.Retrieval, eng.Tenant()); err != nil {
		return Summary{}, err
	}
	ids := make([]string, cfg.Orders)
	for i := range ids {
		ids[i] = RunID(OrderID(i + 1))
		// The support chat recorded the customer's dialog before the run starts.
		o, _ := OrderFor(OrderID(i + 1))
		if err := OpenDialog(ctx, svc.Sessions, eng.Tenant(), o); err != nil {
			return Summary{}, err
		}
		if _, _, err := eng.Start(ctx, WorkflowName, ids[i], Input{OrderID: OrderID(i + 1)}); err != nil {
			return Summary{}, err
		}
	}
	serveCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = eng.Serve(serveCtx)
	}()
	defer func() {
		stop()
		wg.Wait()
	}()
	t := time.NewTicker(cfg.Poll)
	defer t.Stop()
	for {
		done, err := allSettled(ctx, eng, runs, eng.Tenant(), ids, cfg.ManualApprovals)
		if err != nil && ctx.Err() == nil {
			return Summary{}, err
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return Summary{}, ctx.Err()
		case <-t.C:
		}
	}
	stop()
	wg.Wait()
	return Summarize(ctx, runs, pay, eng.Tenant(), ids)
}

// allSettled tells whether every run is terminal or suspended waiting for an operator.
func allSettled(ctx context.Context, eng *workflow.Engine, runs *run.Service, tenant string, ids []string, manual bool) (bool, error) {
	for _, id := range ids {
		r, err := runs.Get(ctx, tenant, id)
		if err != nil {
			return false, err
		}
		switch {
		case r.Status.Terminal():
			continue
		case r.Status == run.StatusSuspended:
			if eng.Ready(ctx, r) {
				return false, nil
			}
			ctl, _, _ := control.Read(r.State)
			if manual && ctl.Wait != nil && ctl.Wait.Kind == "approval" {
				return false, nil
			}
			continue
		default:
			return false, nil
		}
	}
	return true, nil
}

// Summarize counts runs by status and outcome, and refunds in the payments ledger by order.
func Summarize(ctx context.Context, runs *run.Service, pay *Client, tenant string, ids []string) (Summary, error) {
	s := Summary{RunsByStatus: map[string]int{}, RefundsApplied: map[string]int{}, Outcomes: map[string]int{}, Suspended: map[string]string{}, Failed: map[string]string{}, Orders: len(ids)}
	for _, id := range ids {
		r, err := runs.Get(ctx, tenant, id)
		if errors.Is(err, run.ErrNotFound) {
			s.RunsByStatus["missing"]++
			continue
		}
		if err != nil {
			return s, err
		}
		s.RunsByStatus[string(r.Status)]++
		switch r.Status {
		case run.StatusSuspended:
			s.Suspended[id] = r.StatusReason
		case run.StatusFailed:
			s.Failed[id] = r.StatusReason
		}
		var st struct {
			Outcome string `json:"outcome"`
		}
		_ = json.Unmarshal(r.State, &st)
		if st.Outcome != "" {
			s.Outcomes[st.Outcome]++
		}
	}
	refunds, err := pay.Refunds(ctx)
	if err != nil {
		return s, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, rf := range refunds {
		if want[RunID(rf.OrderID)] {
			s.RefundsApplied[rf.OrderID]++
		}
	}
	if len(s.Suspended) == 0 {
		s.Suspended = nil
	}
	if len(s.Failed) == 0 {
		s.Failed = nil
	}
	return s, nil
}
