package workflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

// Event types the engine commits.
const (
	EventStepCompleted   = "step.completed"
	EventStepFailed      = "step.failed"
	EventStepSuspended   = "step.suspended"
	EventBudgetExhausted = "budget.exhausted"
)

// Options tune an Engine. Zero values take the defaults.
type Options struct {
	// Tenant the engine serves ("default").
	Tenant string
	// Owner names this worker in leases; unique per process by default, so a
	// restarted process never inherits a dead one's lease and epoch.
	Owner string
	// LeaseTTL is how long a lease lasts without renewal (10s); a crashed
	// worker's runs are picked up by others after it.
	LeaseTTL time.Duration
	// PollInterval is how often Serve looks for runs to pick up (250ms).
	PollInterval time.Duration
	// Concurrency is how many runs Serve drives at once (4).
	Concurrency int
	// RetryBackoff is the pause before a failed step is tried again (100ms).
	RetryBackoff time.Duration
	// MaxSends bounds how often one operation is sent without an answer (3).
	MaxSends int
	// Approver decides approvals by policy; nil leaves them to a person.
	Approver Approver
	// Artifacts resolves artifact digests for resume verification.
	Artifacts resume.ArtifactResolver
	Logger    *slog.Logger
	// Hooks are for tests (crash points); production leaves them zero.
	Hooks Hooks
}

// Engine runs workflows on durable runs.
type Engine struct {
	runs     *run.Service
	ops      *toolop.Service
	verifier *resume.Verifier
	opts     Options
	mu       sync.RWMutex
	flows    map[string]*Workflow
}

// New makes an engine over a run service and an operation ledger.
func New(runs *run.Service, ops *toolop.Service, opts Options) *Engine {
	if opts.Tenant == "" {
		opts.Tenant = "default"
	}
	if opts.Owner == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		host, _ := os.Hostname()
		opts.Owner = fmt.Sprintf("%s-%d-%s", strings.ReplaceAll(host, " ", "_"), os.Getpid(), hex.EncodeToString(b))
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 10 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 100 * time.Millisecond
	}
	if opts.MaxSends <= 0 {
		opts.MaxSends = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{runs: runs, ops: ops, opts: opts, flows: map[string]*Workflow{}}
	e.verifier = &resume.Verifier{Runs: runs, Ops: ops, Workflows: e.knows, Artifacts: opts.Artifacts}
	return e
}

// Owner is the lease owner name of this engine.
func (e *Engine) Owner() string { return e.opts.Owner }

// Tenant is the tenant this engine serves.
func (e *Engine) Tenant() string { return e.opts.Tenant }

// Verifier is the resume verifier the engine uses.
func (e *Engine) Verifier() *resume.Verifier { return e.verifier }

// Register adds a workflow. Its schema version becomes the registry's
// current one for that workflow unless one is declared already.
func (e *Engine) Register(w Workflow) error {
	if err := w.validate(); err != nil {
		return fmt.Errorf("register workflow: %w", err)
	}
	if w.SchemaVersion > 0 {
		if _, ok := e.runs.Registry().Current(w.Name); !ok {
			e.runs.Registry().SetCurrent(w.Name, w.SchemaVersion)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flows[w.Name] = &w
	return nil
}

// RegisterTool adds a tool with its lookup and contract version.
func (e *Engine) RegisterTool(t toolop.Tool) error { return e.ops.RegisterTool(t) }

func (e *Engine) flow(name string) (*Workflow, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	w, ok := e.flows[name]
	return w, ok
}

func (e *Engine) knows(name, version string) (bool, error) {
	w, ok := e.flow(name)
	if !ok {
		return false, nil
	}
	if version == w.Version {
		return true, nil
	}
	for _, v := range w.Compatible {
		if v == version {
			return true, nil
		}
	}
	return true, fmt.Errorf("this code runs version %s and cannot continue version %s", w.Version, version)
}

// createRequest is the create of a run of w with input as its state.
func (e *Engine) createRequest(w *Workflow, runID string, input any) (run.CreateRequest, error) {
	state := json.RawMessage(`{}`)
	if input != nil {
		b, err := json.Marshal(input)
		if err != nil {
			return run.CreateRequest{}, fmt.Errorf("input: %w", err)
		}
		state = b
	}
	state, err := control.Write(state, control.Record{Budget: w.Budget})
	if err != nil {
		return run.CreateRequest{}, err
	}
	return run.CreateRequest{
		RunID: runID, WorkflowName: w.Name, WorkflowVersion: w.Version,
		StateSchemaVersion: w.SchemaVersion, State: state, NextStep: w.Steps[0].Name,
	}, nil
}

// Start creates a run of the workflow with input as its initial state, once:
// starting the same run id again returns the existing run with created=false.
func (e *Engine) Start(ctx context.Context, workflow, runID string, input any) (run.Run, bool, error) {
	w, ok := e.flow(workflow)
	if !ok {
		return run.Run{}, false, fmt.Errorf("start %s: %w", workflow, ErrUnknownWorkflow)
	}
	req, err := e.createRequest(w, runID, input)
	if err != nil {
		return run.Run{}, false, fmt.Errorf("start %s: %w", workflow, err)
	}
	r, created, err := e.runs.Create(ctx, e.opts.Tenant, req, "")
	if errors.Is(err, run.ErrAlreadyExists) && runID != "" {
		r, err = e.runs.Get(ctx, e.opts.Tenant, runID)
		if err != nil {
			return run.Run{}, false, err
		}
		if r.WorkflowName != w.Name {
			return r, false, fmt.Errorf("start %s: run %s exists for workflow %s: %w", workflow, runID, r.WorkflowName, run.ErrAlreadyExists)
		}
		return r, false, nil
	}
	if err != nil {
		return run.Run{}, false, fmt.Errorf("start %s: %w", workflow, err)
	}
	return r, created, nil
}

// Execute starts a run of the workflow with input as its initial state and
// drives it here until it completes, fails or is suspended, or ctx ends,
// as Start then DriveRun would. A new run is created with this engine's
// lease in the same statement, so its first step follows with no lease
// round trip and no read. A run id that exists already is driven as Drive
// drives it: a restarted caller continues its run, once the lease its
// crashed process held has expired (until then ErrLeaseHeld, whose
// *run.LeaseHeldError says when; a worker that keeps its Owner name across
// restarts takes its own lease back at once).
func (e *Engine) Execute(ctx context.Context, workflow, runID string, input any) (run.Run, error) {
	w, ok := e.flow(workflow)
	if !ok {
		return run.Run{}, fmt.Errorf("execute %s: %w", workflow, ErrUnknownWorkflow)
	}
	req, err := e.createRequest(w, runID, input)
	if err != nil {
		return run.Run{}, fmt.Errorf("execute %s: %w", workflow, err)
	}
	r, l, created, err := e.runs.CreateLeased(ctx, e.opts.Tenant, req, "", e.opts.Owner, e.opts.LeaseTTL)
	if errors.Is(err, run.ErrAlreadyExists) && runID != "" {
		cur, err := e.runs.Get(ctx, e.opts.Tenant, runID)
		if err != nil {
			return run.Run{}, err
		}
		if cur.WorkflowName != w.Name {
			return cur, fmt.Errorf("execute %s: run %s exists for workflow %s: %w", workflow, runID, cur.WorkflowName, run.ErrAlreadyExists)
		}
		return e.DriveRun(ctx, cur)
	}
	if err != nil {
		return run.Run{}, fmt.Errorf("execute %s: %w", workflow, err)
	}
	if !created {
		return e.DriveRun(ctx, r)
	}
	if cur, ok := e.runs.Registry().Current(r.WorkflowName); ok && cur != r.StateSchemaVersion {
		// A migration is due (drive resumes such a run through verification).
		e.release(ctx, r.RunID, l)
		return e.Drive(ctx, r.RunID)
	}
	// Created here at revision 1, running: nothing to verify, as for a
	// fresh run in drive.
	return e.finished(ctx, r.RunID)(e.execute(ctx, w, r, l))
}

// Resume runs the resume verification for a run and leaves it running under
// this engine's lease, without executing a step.
func (e *Engine) Resume(ctx context.Context, runID string) (resume.Result, error) {
	return e.verifier.Resume(ctx, resume.Request{TenantID: e.opts.Tenant, RunID: runID, Owner: e.opts.Owner, LeaseTTL: e.opts.LeaseTTL, SuspendOnRefusal: true})
}

// Drive takes a run and executes its steps until it completes, fails or is
// suspended, or ctx ends. A fresh run is simply leased; any other is resumed
// through verification first. It returns the run as last committed. A run
// another worker finished meanwhile is returned without error. A run of a
// workflow version this code cannot continue (neither Version nor listed in
// Compatible) is left as it is, with ErrIncompatibleVersion.
func (e *Engine) Drive(ctx context.Context, runID string) (run.Run, error) {
	return e.finished(ctx, runID)(e.drive(ctx, runID, nil))
}

// DriveRun is Drive for a run the caller has just read or created (as Start
// returns it): a fresh run then costs one lease before its first step, and
// no read. If the run changed since, it is read again, as Drive would.
func (e *Engine) DriveRun(ctx context.Context, r run.Run) (run.Run, error) {
	if r.TenantID != e.opts.Tenant || r.RunID == "" || r.WorkflowName == "" {
		return e.Drive(ctx, r.RunID)
	}
	return e.finished(ctx, r.RunID)(e.drive(ctx, r.RunID, &r))
}

// finished turns "not active" into the finished run, for Drive's promise.
func (e *Engine) finished(ctx context.Context, runID string) func(run.Run, error) (run.Run, error) {
	return func(r run.Run, err error) (run.Run, error) {
		if errors.Is(err, run.ErrRunNotActive) {
			if cur, gerr := e.runs.Get(ctx, e.opts.Tenant, runID); gerr == nil && cur.Status.Terminal() {
				return cur, nil
			}
		}
		return r, err
	}
}

// drive drives runID; known, if not nil, is the run as the caller last saw it.
func (e *Engine) drive(ctx context.Context, runID string, known *run.Run) (run.Run, error) {
	tn := e.opts.Tenant
	var r run.Run
	if known != nil {
		r = *known
	} else {
		var err error
		if r, err = e.runs.Get(ctx, tn, runID); err != nil {
			return r, err
		}
	}
	if r.Status.Terminal() {
		return r, nil
	}
	w, ok := e.flow(r.WorkflowName)
	if !ok {
		return r, fmt.Errorf("drive run %s: %w: %s", runID, ErrUnknownWorkflow, r.WorkflowName)
	}
	// A run of a version this code cannot continue is another worker's (a
	// rolling deploy runs both): neither executed here with these steps,
	// nor suspended by a refused resume that no worker would take up again.
	if _, err := e.knows(r.WorkflowName, r.WorkflowVersion); err != nil {
		return r, fmt.Errorf("drive run %s: %w: %v", runID, ErrIncompatibleVersion, err)
	}
	if cur, ok := e.runs.Registry().Current(r.WorkflowName); r.StateRevision == 1 && r.Status == run.StatusRunning && (!ok || cur == r.StateSchemaVersion) {
		// Nothing was ever committed and no migration is due: nothing to
		// verify. The lease answers the run's revision: still 1 means the
		// run is as read (only a commit changes it), so no second read.
		l, err := e.runs.AcquireLease(ctx, tn, runID, e.opts.Owner, 0, e.opts.LeaseTTL)
		if err != nil {
			return r, err
		}
		rev := l.Revision
		if rev == 0 {
			// A store that does not answer the revision: read it.
			cur, err := e.runs.Get(ctx, tn, runID)
			if err != nil {
				e.release(ctx, runID, l)
				return r, err
			}
			r, rev = cur, cur.StateRevision
		}
		if rev != 1 {
			e.release(ctx, runID, l)
			return e.drive(ctx, runID, nil)
		}
		r.LeaseOwner, r.LeaseEpoch, r.LeaseExpiresAt = l.Owner, l.Epoch, &l.ExpiresAt
		return e.execute(ctx, w, r, l)
	}
	res, err := e.Resume(ctx, runID)
	if err != nil {
		if res.Refused {
			e.opts.Logger.Info("resume refused", "run", runID, "check", res.FailedCheck, "reason", res.Reason)
		}
		return res.Run, err
	}
	return e.execute(ctx, w, res.Run, res.Lease)
}

func (e *Engine) release(ctx context.Context, runID string, l run.Lease) {
	// Worth trying after the caller gave up, not worth waiting on: the lease
	// expires anyway.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = e.runs.ReleaseLease(rctx, e.opts.Tenant, runID, l)
}

// execute runs steps under the lease, renewing it in the background, until
// the run leaves the running status or the lease is lost.
func (e *Engine) execute(ctx context.Context, w *Workflow, r run.Run, l run.Lease) (run.Run, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	runID := r.RunID
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.heartbeat(ctx, cancel, runID, l)
	}()
	defer func() {
		cancel(nil)
		wg.Wait()
		// A finished run takes no lease any more: releasing it would only cost a write.
		if !r.Status.Terminal() {
			e.release(ctx, runID, l)
		}
	}()
	for r.Status == run.StatusRunning {
		if err := ctx.Err(); err != nil {
			if c := context.Cause(ctx); c != nil {
				err = c
			}
			return r, err
		}
		next, err := e.runStep(ctx, w, r, l)
		if err != nil {
			// A step cut short by the lost lease fails with "context
			// canceled"; the caller must see why: the lease is gone (a
			// conflict another worker's progress explains).
			if c := context.Cause(ctx); c != nil && ctx.Err() != nil && !errors.Is(err, c) {
				err = fmt.Errorf("%w (the step stopped: %v)", c, err)
			}
			return r, err
		}
		r = next
	}
	return r, nil
}

func (e *Engine) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, runID string, l run.Lease) {
	t := time.NewTicker(e.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := e.runs.AcquireLease(ctx, e.opts.Tenant, runID, l.Owner, l.Epoch, e.opts.LeaseTTL); err != nil {
				if ctx.Err() == nil {
					cancel(fmt.Errorf("renew lease of run %s: %w", runID, err))
				}
				return
			}
		}
	}
}

// runStep executes the run's next step and commits its outcome.
func (e *Engine) runStep(ctx context.Context, w *Workflow, r run.Run, l run.Lease) (run.Run, error) {
	// One parse of the state serves the control object and the step.
	top, ctl, err := control.ReadSplit(r.State)
	if err != nil {
		return e.commit(ctx, r, l, r.State, r.NextStep, run.StatusSuspended, "state control object unreadable: "+err.Error(), EventStepSuspended, "", 0, nil)
	}
	step, idx, ok := w.step(r.NextStep)
	if !ok {
		return e.commit(ctx, r, l, r.State, r.NextStep, run.StatusSuspended, fmt.Sprintf("workflow %s %s has no step %q", w.Name, w.Version, r.NextStep), EventStepSuspended, "", 0, nil)
	}
	if ex := ctl.Budget.Exhausted(ctl.Spent); ex != "" {
		return e.commit(ctx, r, l, r.State, r.NextStep, run.StatusSuspended, "budget exhausted: "+ex, EventBudgetExhausted, step.Name, ctl.Attempt, map[string]any{"budget": ctl.Budget, "spent": ctl.Spent})
	}
	delete(top, control.Key)
	t0 := time.Now()
	sc := &StepContext{e: e, run: r, step: step.Name, attempt: ctl.Attempt, state: top, ctl: ctl, started: t0}
	serr := safeRun(e.withHooks(ctx), step, sc)
	sc.spend.WallMS += time.Since(t0).Milliseconds()
	if ctx.Err() != nil {
		// Lease lost or shutting down: commit nothing, the next owner redoes the step.
		if c := context.Cause(ctx); c != nil {
			return r, c
		}
		return r, ctx.Err()
	}

	var susp *suspension
	if sc.suspend != nil {
		susp = sc.suspend
	} else if serr != nil {
		errors.As(serr, &susp)
	}
	var (
		state        json.RawMessage
		next, reason string
		status       = run.StatusRunning
	)
	if susp == nil && serr == nil {
		// The step's result, which the store may yet refuse (a state its
		// schema or the size limit refuses, a step that does not exist):
		// then the step failed, as if it had returned the refusal, so its
		// attempts count and the run fails after MaxAttempts instead of
		// running the step again at every poll.
		if state, next, status, reason, serr = e.result(w, r, step, idx, sc); serr == nil {
			done := map[string]any{"spend": sc.spend}
			if len(sc.ops) > 0 {
				done["operations"] = sc.ops
			}
			nr, err := e.commit(ctx, r, l, state, next, status, reason, EventStepCompleted, step.Name, sc.attempt, done)
			if err == nil {
				if len(sc.ops) > 0 {
					e.at(ctx, FaultAfterCheckpoint, r.RunID)
				}
				return nr, nil
			}
			if !refusedResult(err) {
				return r, err
			}
			serr = fmt.Errorf("the step's result was refused: %w", err)
		}
		sc.spend.Steps = 0
	}
	payload := map[string]any{"spend": sc.spend}
	if len(sc.ops) > 0 {
		payload["operations"] = sc.ops
	}
	switch {
	case susp != nil:
		// Keep only the ledger and control facts; the step's state edits are redone.
		ctl.Spent = ctl.Spent.Add(sc.spend)
		ctl.Tools, ctl.Approvals, ctl.Artifacts = sc.ctl.Tools, sc.ctl.Approvals, sc.ctl.Artifacts
		ctl.Wait = susp.wait
		state, err := control.Write(r.State, ctl)
		if err != nil {
			return r, err
		}
		payload["reason"] = susp.reason
		return e.commit(ctx, r, l, state, step.Name, run.StatusSuspended, susp.reason, EventStepSuspended, step.Name, ctl.Attempt, payload)
	default: // serr != nil: the step, or its refused result, failed
		ctl.Spent = ctl.Spent.Add(sc.spend)
		ctl.Attempt++
		payload["error"] = serr.Error()
		max := step.MaxAttempts
		if max <= 0 {
			max = 3
		}
		status, reason := run.StatusRunning, ""
		if ctl.Attempt >= max {
			status, reason = run.StatusFailed, fmt.Sprintf("step %s failed after %d attempts: %v", step.Name, ctl.Attempt, serr)
		}
		state, err := control.Write(r.State, ctl)
		if err != nil {
			return r, err
		}
		nr, err := e.commit(ctx, r, l, state, step.Name, status, reason, EventStepFailed, step.Name, ctl.Attempt-1, payload)
		if err == nil && status == run.StatusRunning {
			select {
			case <-ctx.Done():
			case <-time.After(e.opts.RetryBackoff * time.Duration(ctl.Attempt)):
			}
		}
		return nr, err
	}
}

// result is what a step that returned nil commits: its state with the
// control object, where the run goes next, and its status.
func (e *Engine) result(w *Workflow, r run.Run, step Step, idx int, sc *StepContext) (state json.RawMessage, next string, status run.Status, reason string, err error) {
	sc.spend.Steps = 1
	ctl := sc.ctl
	ctl.Spent = ctl.Spent.Add(sc.spend)
	ctl.Attempt, ctl.Wait = 0, nil
	status = run.StatusRunning
	switch {
	case sc.failRun != "":
		status, reason = run.StatusFailed, sc.failRun
	case sc.complete:
		status = run.StatusCompleted
	case sc.nextSet:
		next = sc.next
		if _, _, ok := w.step(next); !ok {
			return nil, "", "", "", fmt.Errorf("step %s goes to unknown step %q", step.Name, next)
		}
	case idx+1 < len(w.Steps):
		next = w.Steps[idx+1].Name
	default:
		status = run.StatusCompleted
	}
	// The step is over: its state map is encoded once, with the control
	// object added (control.Write of its encoding, without parsing it again).
	if state, err = control.WriteTop(sc.state, ctl); err != nil {
		return nil, "", "", "", fmt.Errorf("run %s: %w", r.RunID, err)
	}
	return state, next, status, reason, nil
}

// refusedResult tells a commit the store refused for what the step made
// (the same result would be refused again) from one that lost a race or
// the lease, or failed on the way (another try, by this or another owner).
func refusedResult(err error) bool {
	for _, e := range []error{run.ErrSchemaValidation, run.ErrStateTooLarge, run.ErrInvalidInput, run.ErrNoMigrationPath, run.ErrInvalidTransition} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (e *Engine) commit(ctx context.Context, r run.Run, l run.Lease, state json.RawMessage, next string, status run.Status, reason, eventType, stepID string, attempt int, payload any) (run.Run, error) {
	var p json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return r, fmt.Errorf("run %s: encode event: %w", r.RunID, err)
		}
		p = b
	}
	if len(reason) > 4000 {
		reason = reason[:4000]
	}
	nr, _, err := e.runs.Commit(ctx, r.TenantID, r.RunID, run.CommitRequest{
		ExpectedRevision: r.StateRevision, Lease: l, State: state, NextStep: next,
		Status: status, StatusReason: reason,
		Event: run.EventInput{EventType: eventType, StepID: stepID, Attempt: attempt, Payload: p},
	})
	if err != nil {
		return r, err
	}
	return nr, nil
}

func safeRun(ctx context.Context, s Step, sc *StepContext) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("step %s panicked: %v", s.Name, p)
		}
	}()
	return s.Run(ctx, sc)
}
