package workflow

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

// Serve is the recovery loop: until ctx ends it looks for runs of registered
// workflows that are running without a live lease (new, or their worker died)
// or suspended on something that has since been settled (an approval decided,
// an operation resolved by hand), and drives them with Concurrency workers.
// Several processes may serve one store: leases decide who drives a run.
func (e *Engine) Serve(ctx context.Context) error {
	jobs := make(chan string)
	var inflight sync.Map
	var wg sync.WaitGroup
	for i := 0; i < e.opts.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range jobs {
				if _, err := e.Drive(ctx, id); err != nil && ctx.Err() == nil && !isRoutine(err) {
					e.opts.Logger.Warn("drive run", "run", id, "err", err)
				}
				inflight.Delete(id)
			}
		}()
	}
	defer func() {
		close(jobs)
		wg.Wait()
	}()
	t := time.NewTicker(e.opts.PollInterval)
	defer t.Stop()
	for {
		ids, err := e.Due(ctx)
		if err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("scan runs", "err", err)
		}
		for _, id := range ids {
			if _, busy := inflight.LoadOrStore(id, true); busy {
				continue
			}
			select {
			case jobs <- id:
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// isRoutine tells errors that are part of normal contention between workers.
func isRoutine(err error) bool {
	return errors.Is(err, run.ErrLeaseHeld) || errors.Is(err, run.ErrLeaseLost) ||
		errors.Is(err, run.ErrRevisionConflict) || errors.Is(err, resume.ErrRefused)
}

// Due lists the runs of registered workflows that a worker should pick up now.
func (e *Engine) Due(ctx context.Context) ([]string, error) {
	var due []string
	now := time.Now()
	for _, st := range []run.Status{run.StatusRunning, run.StatusSuspended} {
		cursor := ""
		for {
			runs, next, err := e.runs.List(ctx, e.opts.Tenant, st, "", cursor, run.MaxListLimit)
			if err != nil {
				return due, err
			}
			for _, r := range runs {
				if _, ok := e.flow(r.WorkflowName); !ok {
					continue
				}
				if st == run.StatusRunning {
					if r.LeaseOwner == "" || r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.After(now) {
						due = append(due, r.RunID)
					}
				} else if e.settled(ctx, r) {
					due = append(due, r.RunID)
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return due, nil
}

// settled tells whether what a suspended run waits for has happened.
func (e *Engine) settled(ctx context.Context, r run.Run) bool {
	ctl, _, err := toolop.ReadControl(r.State)
	if err != nil {
		return false
	}
	tn := r.TenantID
	if w := ctl.Wait; w != nil {
		switch w.Kind {
		case "approval":
			a, err := e.ops.GetApproval(ctx, tn, w.ApprovalID)
			return err == nil && a.Effective(e.ops.Now()) != string(toolop.ApprovalPending)
		case "operation":
			op, err := e.ops.Get(ctx, tn, w.OperationID)
			return err == nil && !op.Status.InDoubt()
		case "approval_guard":
			return e.guardsValid(ctx, r, ctl)
		}
	}
	// A resume refused on reconciliation or approvals is retried once they are settled.
	switch {
	case strings.HasPrefix(r.StatusReason, "resume refused: "+resume.CheckOperations+":"):
		ops, err := e.ops.List(ctx, tn, r.RunID)
		if err != nil {
			return false
		}
		for _, op := range ops {
			if op.Status.InDoubt() {
				return false
			}
		}
		return true
	case strings.HasPrefix(r.StatusReason, "resume refused: "+resume.CheckApprovals+":"):
		return e.guardsValid(ctx, r, ctl)
	}
	return false
}

func (e *Engine) guardsValid(ctx context.Context, r run.Run, ctl toolop.Control) bool {
	for _, g := range ctl.Approvals {
		if g.OperationID != "" {
			if op, err := e.ops.Get(ctx, r.TenantID, g.OperationID); err == nil && op.Status.Final() {
				continue
			}
		}
		if _, err := e.ops.ValidApproval(ctx, r.TenantID, r.RunID, g.StepID, g.RequestDigest); err != nil {
			return false
		}
	}
	return true
}

// Ready tells whether a suspended run waits for nothing any more (its
// approval was decided, its operation resolved), so Serve will resume it.
func (e *Engine) Ready(ctx context.Context, r run.Run) bool {
	return r.Status == run.StatusSuspended && e.settled(ctx, r)
}
