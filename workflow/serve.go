package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

// Serve is the recovery loop: until ctx ends it looks for runs of registered
// workflows that are running without a live lease (new, or their worker died)
// or suspended on something that has since been settled (an approval decided
// or expired, an operation resolved by hand), and drives them with
// Concurrency workers. Several processes may serve one store: leases decide
// who drives a run. A run of a version of its workflow that this code
// cannot continue is left to a worker that runs that version.
//
// A poll costs what the due runs cost, not what the store holds: the
// store lists running runs without a live lease and suspended runs that a
// wake-up names (written with the approval decision or the operation's
// settlement, see run.Store.ListRecoverable); only those are checked, and a
// wake-up is acknowledged once it was acted on.
func (e *Engine) Serve(ctx context.Context) error {
	jobs := make(chan dueRun)
	var inflight sync.Map
	var wg sync.WaitGroup
	for i := 0; i < e.opts.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				_, err := e.Drive(ctx, j.id)
				if err != nil && ctx.Err() == nil && !isRoutine(err) {
					e.opts.Logger.Warn("drive run", "run", j.id, "err", err)
				}
				// A lease held elsewhere or a failed drive keeps the wake-up:
				// the run is looked at again next time.
				if len(j.wakeups) > 0 && (err == nil || errors.Is(err, resume.ErrRefused)) {
					e.ack(ctx, j.id, j.wakeups)
				}
				inflight.Delete(j.id)
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
		due, err := e.due(ctx, true)
		if err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("scan runs", "err", err)
		}
		for _, j := range due {
			if _, busy := inflight.LoadOrStore(j.id, true); busy {
				continue
			}
			select {
			case jobs <- j:
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
		errors.Is(err, run.ErrRevisionConflict) || errors.Is(err, resume.ErrRefused) ||
		errors.Is(err, ErrIncompatibleVersion)
}

// dueRun is a run to drive, with the wake-ups that made it due (none for a
// running run), to acknowledge once driven.
type dueRun struct {
	id      string
	wakeups []run.Wakeup
}

// Due lists the runs of registered workflows that a worker should pick up
// now. It acknowledges nothing.
func (e *Engine) Due(ctx context.Context) ([]string, error) {
	due, err := e.due(ctx, false)
	ids := make([]string, len(due))
	for i, j := range due {
		ids[i] = j.id
	}
	return ids, err
}

// due pages through the store's recoverable runs. A woken suspended run
// whose wait is not settled has its wake-ups acknowledged at once when ack
// is set: they were read before the check, so one written after it (the
// event came later) differs and survives the acknowledgement.
func (e *Engine) due(ctx context.Context, ack bool) ([]dueRun, error) {
	var due []dueRun
	q := run.RecoveryQuery{Now: e.ops.Now(), ControlKey: control.Key, Limit: run.MaxListLimit}
	for {
		page, err := e.runs.Store().ListRecoverable(ctx, e.opts.Tenant, q)
		if err != nil {
			return due, fmt.Errorf("list recoverable runs: %w", err)
		}
		for _, rc := range page {
			q.AfterRunID = rc.RunID
			if _, ok := e.flow(rc.WorkflowName); !ok {
				// Another engine may serve this workflow: leave its wake-ups.
				continue
			}
			if rc.Status == run.StatusRunning {
				due = append(due, dueRun{id: rc.RunID})
				continue
			}
			ctl, err := controlOf(rc.Control)
			if err == nil && e.settled(ctx, rc.TenantID, rc.RunID, rc.StatusReason, ctl) {
				due = append(due, dueRun{id: rc.RunID, wakeups: rc.Wakeups})
			} else if ack {
				e.ack(ctx, rc.RunID, rc.Wakeups)
			}
		}
		if len(page) < q.Limit {
			return due, nil
		}
	}
}

func (e *Engine) ack(ctx context.Context, runID string, w []run.Wakeup) {
	if err := e.runs.Store().AckWakeups(ctx, e.opts.Tenant, runID, w); err != nil && ctx.Err() == nil {
		e.opts.Logger.Warn("acknowledge wake-ups", "run", runID, "err", err)
	}
}

// controlOf decodes the control object as the store returned it (nil when
// the state has none).
func controlOf(raw json.RawMessage) (control.Record, error) {
	var c control.Record
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return c, nil
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return control.Record{}, fmt.Errorf("state.%s: %w", control.Key, err)
	}
	return c, nil
}

// settled tells whether what a suspended run waits for has happened.
func (e *Engine) settled(ctx context.Context, tn, runID, reason string, ctl control.Record) bool {
	if w := ctl.Wait; w != nil {
		switch w.Kind {
		case "approval":
			a, err := e.ops.GetApproval(ctx, tn, w.ApprovalID)
			return err == nil && a.Effective(e.ops.Now()) != string(toolop.ApprovalPending)
		case "operation":
			op, err := e.ops.Get(ctx, tn, w.OperationID)
			return err == nil && !op.Status.InDoubt()
		case "approval_guard":
			return e.guardsValid(ctx, tn, runID, ctl)
		}
	}
	// A resume refused on reconciliation or approvals is retried once they are settled.
	switch {
	case strings.HasPrefix(reason, resume.RefusalPrefix+resume.CheckOperations+":"):
		ops, err := e.ops.List(ctx, tn, runID)
		if err != nil {
			return false
		}
		for _, op := range ops {
			if op.Status.InDoubt() {
				return false
			}
		}
		return true
	case strings.HasPrefix(reason, resume.RefusalPrefix+resume.CheckApprovals+":"):
		return e.guardsValid(ctx, tn, runID, ctl)
	}
	return false
}

func (e *Engine) guardsValid(ctx context.Context, tn, runID string, ctl control.Record) bool {
	for _, g := range ctl.Approvals {
		if g.OperationID != "" {
			if op, err := e.ops.Get(ctx, tn, g.OperationID); err == nil && op.Status.Final() {
				continue
			}
		}
		if _, err := e.ops.ValidApproval(ctx, tn, runID, g.StepID, g.RequestDigest); err != nil {
			return false
		}
	}
	return true
}

// Ready tells whether a suspended run waits for nothing any more (its
// approval was decided, its operation resolved), so Serve will resume it.
func (e *Engine) Ready(ctx context.Context, r run.Run) bool {
	if r.Status != run.StatusSuspended {
		return false
	}
	ctl, _, err := control.Read(r.State)
	return err == nil && e.settled(ctx, r.TenantID, r.RunID, r.StatusReason, ctl)
}
