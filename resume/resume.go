package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

// ErrRefused is returned (wrapped) when a check fails; Result names it.
var ErrRefused = errors.New("resume refused")

// RefusalPrefix starts the status reason of a run a refused resume
// suspended for an operator: "resume refused: <check>: <detail>".
const RefusalPrefix = "resume refused: "

// HeldForOperator tells whether a refused resume suspended r for an
// operator: only a resume, which verifies again, may take it up.
func HeldForOperator(r run.Run) bool {
	return r.Status == run.StatusSuspended && strings.HasPrefix(r.StatusReason, RefusalPrefix)
}

// Names of the checks, in the order they run.
const (
	CheckLease         = "lease"
	CheckTenant        = "tenant"
	CheckWorkflow      = "workflow_version"
	CheckSchema        = "state_schema"
	CheckArtifacts     = "artifacts"
	CheckToolContracts = "tool_contracts"
	CheckEvents        = "event_sequence"
	CheckOperations    = "operations"
	CheckApprovals     = "approvals"
	CheckBudgets       = "budgets"
)

// Event types the verifier commits.
const (
	EventVerified = "resume.verified"
	EventRefused  = "resume.refused"
)

// Status of one check.
type Status string

// Check outcomes.
const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Skipped Status = "skipped"
)

// Check is the result of one named verification.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Result is the outcome of a resume: the checks in order, and on success the
// run (running, migrated if needed) and the lease the caller now holds.
type Result struct {
	Run     run.Run   `json:"run"`
	Lease   run.Lease `json:"lease"`
	Checks  []Check   `json:"checks"`
	Refused bool      `json:"refused"`
	// FailedCheck names the check that refused, if any.
	FailedCheck string `json:"failed_check,omitempty"`
	// Reason is the status reason the run was suspended with on refusal.
	Reason string `json:"reason,omitempty"`
}

// ArtifactResolver returns the current digest of the artifact at uri.
type ArtifactResolver func(ctx context.Context, uri string) (digest string, err error)

// WorkflowCheck tells whether this code can continue a run of the workflow at
// the given version. known=false means the workflow is not registered here.
type WorkflowCheck func(name, version string) (known bool, err error)

// Verifier runs the checks. Runs and Ops are required; the rest may be nil.
type Verifier struct {
	Runs      *run.Service
	Ops       *toolop.Service
	Workflows WorkflowCheck
	Artifacts ArtifactResolver
}

// Request asks to resume one run for an owner.
type Request struct {
	TenantID string
	RunID    string
	Owner    string
	LeaseTTL time.Duration
	// ExpectedRevision, when non-zero, must equal the run's revision once the lease is held.
	ExpectedRevision int64
	// SuspendOnRefusal makes a refusal after the lease was taken suspend the
	// run with the failed check as its reason (a resume.refused event). The
	// workflow engine asks for it: its recovery loop then waits for what the
	// check needs. Without it (the HTTP API) a refusal changes nothing: the
	// lease is released and the run is as it was.
	SuspendOnRefusal bool
}

// Resume verifies the run and, if every check passes, leaves it running under
// the caller's lease (a resume.verified event records the checks). A failure
// after the lease was taken releases the lease and returns ErrRefused, the
// Result naming the check and carrying every check that ran; the run is left
// as it was unless req.SuspendOnRefusal asks to suspend it. A lease
// held by another owner or a revision mismatch changes nothing and returns
// run.ErrLeaseHeld or run.ErrRevisionConflict.
func (v *Verifier) Resume(ctx context.Context, req Request) (Result, error) {
	if req.ExpectedRevision < 0 {
		// Not a revision any run is at: a bad request, not a conflict.
		return Result{}, fmt.Errorf("resume run %s: %w: expected_revision must not be negative (0: any revision)", req.RunID, run.ErrInvalidInput)
	}
	if !req.SuspendOnRefusal {
		// A dry pass first, without the lease: a run that would be refused
		// is refused before anything of it changes (not even the lease
		// epoch). A pass that would succeed is run again under the lease.
		res, err := v.resume(ctx, req, true)
		if (err != nil || res.Refused) && !v.movedUnder(ctx, req, res) {
			return res, err
		}
		// Passed, or refused by a check other than the lease on a run
		// that moved while the dry pass read it (another resume or a
		// commit between its reads: the log it read may run past the
		// revision it read, which is no fault of the run). The pass under
		// the lease decides: it answers lease-held if another took it.
	}
	return v.resume(ctx, req, false)
}

// movedUnder tells whether the dry pass refused res on a check other than
// the lease while the run changed (revision, lease epoch or status) since
// it read it, so that the refusal may be from a torn view.
func (v *Verifier) movedUnder(ctx context.Context, req Request, res Result) bool {
	if !res.Refused || res.FailedCheck == CheckLease || res.Run.RunID == "" {
		return false
	}
	now, err := v.Runs.Get(ctx, req.TenantID, req.RunID)
	if err != nil {
		return false
	}
	return now.StateRevision != res.Run.StateRevision || now.LeaseEpoch != res.Run.LeaseEpoch || now.Status != res.Run.Status
}

// errDryPassed ends a dry pass whose checks all passed.
var errDryPassed = errors.New("dry pass: every check passed")

// resume runs the checks; dry runs them on the run as read, without taking
// the lease, and returns (Result{}, nil) once every check has passed.
func (v *Verifier) resume(ctx context.Context, req Request, dry bool) (Result, error) {
	res, err := v.check(ctx, req, dry)
	if errors.Is(err, errDryPassed) {
		return Result{}, nil
	}
	return res, err
}

func (v *Verifier) check(ctx context.Context, req Request, dry bool) (Result, error) {
	var res Result
	add := func(name string, st Status, format string, args ...any) {
		res.Checks = append(res.Checks, Check{Name: name, Status: st, Detail: fmt.Sprintf(format, args...)})
	}
	r, err := v.Runs.Get(ctx, req.TenantID, req.RunID)
	if err != nil {
		return res, fmt.Errorf("resume run %s: %w", req.RunID, err)
	}
	if r.Status.Terminal() {
		return res, fmt.Errorf("resume run %s: it is %s: %w", req.RunID, r.Status, run.ErrRunNotActive)
	}

	// 1. Lease, then the revision under it: once the lease is ours, nobody
	// else can commit, so the revision read now is the one we continue from.
	var l run.Lease
	if dry {
		// What AcquireLease would answer, by the run as read; the real pass
		// asks the store.
		if r.LeaseOwner != "" && r.LeaseOwner != req.Owner && r.LeaseExpiresAt != nil && r.LeaseExpiresAt.After(time.Now()) {
			err := &run.LeaseHeldError{RunID: r.RunID, Owner: r.LeaseOwner, ExpiresAt: r.LeaseExpiresAt}
			add(CheckLease, Failed, "%v", err)
			res.Refused, res.FailedCheck, res.Run = true, CheckLease, r
			return res, fmt.Errorf("resume run %s: %w", req.RunID, err)
		}
		l = run.Lease{Owner: req.Owner, Epoch: r.LeaseEpoch + 1}
	} else {
		l, err = v.Runs.AcquireLease(ctx, req.TenantID, req.RunID, req.Owner, 0, req.LeaseTTL)
		if err != nil {
			add(CheckLease, Failed, "%v", err)
			res.Refused, res.FailedCheck, res.Run = true, CheckLease, r
			return res, fmt.Errorf("resume run %s: %w", req.RunID, err)
		}
		res.Lease = l
		r, err = v.Runs.Get(ctx, req.TenantID, req.RunID)
		if err != nil {
			return res, v.abandon(ctx, req, l, fmt.Errorf("resume run %s: %w", req.RunID, err))
		}
	}
	if req.ExpectedRevision != 0 && r.StateRevision != req.ExpectedRevision {
		add(CheckLease, Failed, "revision is %d, expected %d", r.StateRevision, req.ExpectedRevision)
		res.Refused, res.FailedCheck, res.Run = true, CheckLease, r
		return res, v.abandon(ctx, req, l, fmt.Errorf("resume run %s: %w", req.RunID,
			&run.RevisionConflictError{RunID: req.RunID, Expected: req.ExpectedRevision, Current: r.StateRevision}))
	}
	if dry {
		add(CheckLease, Passed, "free for %s at revision %d (not taken: checked first)", req.Owner, r.StateRevision)
	} else {
		add(CheckLease, Passed, "owner %s, epoch %d, revision %d", l.Owner, l.Epoch, r.StateRevision)
	}
	res.Run = r

	refuse := func(name, format string, args ...any) (Result, error) {
		detail := fmt.Sprintf(format, args...)
		add(name, Failed, "%s", detail)
		if dry {
			return v.refuseDry(req, res, r, name, detail)
		}
		return v.refuse(ctx, req, res, r, l, name, detail)
	}

	// 2. Tenant, workflow version, state schema.
	if r.TenantID != req.TenantID {
		return refuse(CheckTenant, "run belongs to tenant %s", r.TenantID)
	}
	add(CheckTenant, Passed, "%s", r.TenantID)
	if v.Workflows == nil {
		add(CheckWorkflow, Skipped, "no workflow registry here")
	} else if known, err := v.Workflows(r.WorkflowName, r.WorkflowVersion); err != nil {
		return refuse(CheckWorkflow, "%s %s: %v", r.WorkflowName, r.WorkflowVersion, err)
	} else if !known {
		add(CheckWorkflow, Skipped, "workflow %s is not registered here", r.WorkflowName)
	} else {
		add(CheckWorkflow, Passed, "%s %s", r.WorkflowName, r.WorkflowVersion)
	}
	target, err := v.Runs.Registry().CheckPath(r.WorkflowName, r.StateSchemaVersion)
	if err != nil {
		return refuse(CheckSchema, "%v", err)
	}
	if target != r.StateSchemaVersion {
		add(CheckSchema, Passed, "v%d, migration to v%d available", r.StateSchemaVersion, target)
	} else {
		add(CheckSchema, Passed, "v%d is current", r.StateSchemaVersion)
	}

	ctl, hasCtl, err := control.Read(r.State)
	if err != nil {
		return refuse(CheckArtifacts, "control object unreadable: %v", err)
	}

	// 3. Artifacts and tool contracts.
	if len(ctl.Artifacts) == 0 {
		add(CheckArtifacts, Passed, "none referenced")
	} else if v.Artifacts == nil {
		return refuse(CheckArtifacts, "%d artifacts referenced and no resolver to check them", len(ctl.Artifacts))
	} else {
		for _, a := range ctl.Artifacts {
			d, err := v.Artifacts(ctx, a.URI)
			if err != nil {
				return refuse(CheckArtifacts, "artifact %s: %v", a.URI, err)
			}
			if d != a.Digest {
				return refuse(CheckArtifacts, "artifact %s changed: digest %s, recorded %s", a.URI, d, a.Digest)
			}
		}
		add(CheckArtifacts, Passed, "%d artifacts match their digests", len(ctl.Artifacts))
	}
	var unknownTools []string
	for name, ver := range ctl.Tools {
		t, ok := v.Ops.Tool(name)
		if !ok {
			unknownTools = append(unknownTools, name)
			continue
		}
		if t.ContractVersion != ver {
			return refuse(CheckToolContracts, "tool %s contract is %s, the run was started with %s", name, t.ContractVersion, ver)
		}
	}
	switch {
	case len(ctl.Tools) == 0:
		add(CheckToolContracts, Passed, "none recorded")
	case len(unknownTools) > 0:
		add(CheckToolContracts, Skipped, "tools not registered here: %s", strings.Join(unknownTools, ", "))
	default:
		add(CheckToolContracts, Passed, "%d tool contracts match", len(ctl.Tools))
	}

	// 4. Event-sequence continuity (the hash chain, from where the last
	// resume verified it) and the state against the last event.
	recomputed, detail, verified, err := v.checkEvents(ctx, r)
	if err != nil {
		return res, v.abandon(ctx, req, l, err)
	}
	if detail != "" {
		return refuse(CheckEvents, "%s", detail)
	}
	add(CheckEvents, Passed, "%s", verified)
	verifiedSeq := r.StateRevision

	// 5. Operations in doubt are reconciled before anything else happens
	// (read by an index: the run's settled operations are not read).
	ops, err := v.Ops.InDoubt(ctx, req.TenantID, req.RunID)
	if err != nil {
		return res, v.abandon(ctx, req, l, err)
	}
	opByID := map[string]toolop.Operation{}
	var settled []string
	for _, op := range ops {
		rec, err := v.Ops.Reconcile(ctx, req.TenantID, op.OperationID)
		if err != nil {
			return res, v.abandon(ctx, req, l, err)
		}
		if rec.Answer == toolop.NotAuthoritative {
			return refuse(CheckOperations, "operation %s (%s) is unknown: %s; resolve it by hand", op.OperationID, op.ToolName, rec.Detail)
		}
		opByID[op.OperationID] = rec.Operation
		settled = append(settled, fmt.Sprintf("%s %s", op.OperationID, rec.Answer))
	}
	if len(settled) == 0 {
		add(CheckOperations, Passed, "no operation in doubt")
	} else {
		add(CheckOperations, Passed, "reconciled: %s", strings.Join(settled, ", "))
	}

	// 6. Approvals still valid for the same request digest, unless spent.
	checked := 0
	for _, g := range ctl.Approvals {
		op, ok := opByID[g.OperationID]
		if !ok && g.OperationID != "" {
			// Not in doubt: read the guarded operation itself (only this
			// run's spends the guard).
			got, err := v.Ops.Get(ctx, req.TenantID, g.OperationID)
			switch {
			case err == nil:
				op, ok = got, got.RunID == req.RunID
			case !errors.Is(err, toolop.ErrNotFound):
				return res, v.abandon(ctx, req, l, err)
			}
		}
		if ok && op.Status.Final() {
			continue
		}
		if _, err := v.Ops.ValidApproval(ctx, req.TenantID, req.RunID, g.StepID, g.RequestDigest); err != nil {
			return refuse(CheckApprovals, "step %s: %v", g.StepID, err)
		}
		checked++
	}
	add(CheckApprovals, Passed, "%d approvals in force", checked)

	// 7. Budgets, against the running totals.
	if !hasCtl {
		add(CheckBudgets, Skipped, "run keeps no budget")
	} else {
		if recomputed != ctl.Spent {
			return refuse(CheckBudgets, "spend in state %+v differs from the log's totals %+v", ctl.Spent, recomputed)
		}
		if ex := ctl.Budget.Exhausted(recomputed); ex != "" {
			return refuse(CheckBudgets, "budget exhausted: %s", ex)
		}
		rem := ctl.Budget.Remaining(recomputed)
		add(CheckBudgets, Passed, "remaining steps %d, tokens %d, cost %d micros, wall %d ms (-1: unlimited)", rem.Steps, rem.Tokens, rem.CostMicros, rem.WallMS)
	}

	// All passed: migrate if needed, then record the verification.
	if dry {
		return res, errDryPassed
	}
	if target != r.StateSchemaVersion {
		from := r.StateSchemaVersion
		r, err = v.Runs.Migrate(ctx, req.TenantID, req.RunID, l)
		if err != nil {
			res.Checks[3] = Check{Name: CheckSchema, Status: Failed, Detail: err.Error()}
			return v.refuse(ctx, req, res, res.Run, l, CheckSchema, err.Error())
		}
		res.Checks[3].Detail = fmt.Sprintf("migrated v%d -> v%d", from, r.StateSchemaVersion)
	}
	payload := eventPayload(map[string]any{"owner": l.Owner, "epoch": l.Epoch}, res.Checks, v.Runs.MaxStateBytes())
	nr, _, err := v.Runs.Commit(ctx, req.TenantID, req.RunID, run.CommitRequest{
		ExpectedRevision: r.StateRevision, Lease: l, Status: run.StatusRunning,
		Event: run.EventInput{EventType: EventVerified, Payload: payload},
		State: r.State, NextStep: r.NextStep, VerifiedSeq: verifiedSeq,
	})
	if err != nil {
		return res, v.abandon(ctx, req, l, fmt.Errorf("resume run %s: record verification: %w", req.RunID, err))
	}
	res.Run = nr
	return res, nil
}

// refuse releases the lease and, if the request asks for it, first suspends
// the run with the failed check as its reason.
func (v *Verifier) refuse(ctx context.Context, req Request, res Result, r run.Run, l run.Lease, name, detail string) (Result, error) {
	res.Refused, res.FailedCheck = true, name
	res.Reason = fmt.Sprintf("%s%s: %s", RefusalPrefix, name, detail)
	if len(res.Reason) > 4000 {
		res.Reason = res.Reason[:4000]
	}
	if !req.SuspendOnRefusal {
		res.Run = r
		res.Lease = run.Lease{}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := v.Runs.ReleaseLease(rctx, req.TenantID, req.RunID, l); err != nil && !errors.Is(err, run.ErrLeaseLost) {
			return res, fmt.Errorf("resume run %s: release lease: %w", req.RunID, err)
		}
		return res, fmt.Errorf("run %s: %w: %s", req.RunID, ErrRefused, res.Reason)
	}
	payload := eventPayload(map[string]any{"failed_check": name, "detail": detail}, res.Checks, v.Runs.MaxStateBytes())
	nr, _, err := v.Runs.Commit(ctx, req.TenantID, req.RunID, run.CommitRequest{
		ExpectedRevision: r.StateRevision, Lease: l, Status: run.StatusSuspended, StatusReason: res.Reason,
		Event: run.EventInput{EventType: EventRefused, Payload: payload},
		State: r.State, NextStep: r.NextStep,
	})
	if err != nil {
		return res, v.abandon(ctx, req, l, fmt.Errorf("resume run %s: record refusal (%s): %w", req.RunID, res.Reason, err))
	}
	res.Run = nr
	if err := v.Runs.ReleaseLease(ctx, req.TenantID, req.RunID, l); err != nil && !errors.Is(err, run.ErrLeaseLost) {
		return res, fmt.Errorf("resume run %s: release lease: %w", req.RunID, err)
	}
	res.Lease = run.Lease{}
	return res, fmt.Errorf("run %s: %w: %s", req.RunID, ErrRefused, res.Reason)
}

// eventPayload encodes the payload of a resume event: its fields and
// every check's outcome. Under a small state limit (a payload is held to it
// like any event's) the checks, which the caller's answer carries anyway,
// are left out first, then a "detail" field is cut, with its full length
// recorded, so that the resume is always recorded rather than refused with
// a 413, or a refused run left unsuspended.
func eventPayload(fields map[string]any, checks []Check, limit int) json.RawMessage {
	fields["checks"] = checks
	if b, err := json.Marshal(fields); err == nil && len(b) <= limit {
		return b
	}
	delete(fields, "checks")
	fields["checks_omitted"] = true
	b, _ := json.Marshal(fields)
	detail, ok := fields["detail"].(string)
	if len(b) <= limit || !ok {
		return b
	}
	fields["detail_bytes"] = len(detail)
	for cut := len(detail) / 2; ; cut /= 2 {
		fields["detail"] = strings.ToValidUTF8(detail[:cut], "")
		if b, _ = json.Marshal(fields); len(b) <= limit || cut == 0 {
			return b
		}
	}
}

// refuseDry answers a refusal found by the dry pass: nothing was taken, so
// nothing is given back or changed.
func (v *Verifier) refuseDry(req Request, res Result, r run.Run, name, detail string) (Result, error) {
	res.Refused, res.FailedCheck = true, name
	res.Reason = fmt.Sprintf("%s%s: %s", RefusalPrefix, name, detail)
	if len(res.Reason) > 4000 {
		res.Reason = res.Reason[:4000]
	}
	res.Run, res.Lease = r, run.Lease{}
	return res, fmt.Errorf("run %s: %w: %s", req.RunID, ErrRefused, res.Reason)
}

// abandon gives the lease back after an error that says nothing about the run.
func (v *Verifier) abandon(ctx context.Context, req Request, l run.Lease, err error) error {
	if l.ExpiresAt.IsZero() {
		return err // a dry pass holds no lease
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = v.Runs.ReleaseLease(rctx, req.TenantID, req.RunID, l)
	return err
}

// releaseTimeout bounds giving a lease back after the caller's context ended:
// the release is worth trying, not worth waiting on (the lease expires anyway).
const releaseTimeout = 5 * time.Second

// checkEvents verifies the part of the log no resume verified before: from
// the run's VerifiedSeq, seqs must follow without a gap up to the revision,
// each event must match the hash chain (run.CheckChain), the run's chain
// head must be the last event's, and the last event's state must equal the
// materialized run. Spend comes from the run's running totals; a run from
// before totals were kept has its log summed (key "spend" of the payloads).
func (v *Verifier) checkEvents(ctx context.Context, r run.Run) (control.Spend, string, string, error) {
	var total control.Spend
	st := v.Runs.Store()
	from := r.VerifiedSeq
	if from < 0 || from > r.StateRevision {
		return total, fmt.Sprintf("verified through seq %d, beyond the revision %d", from, r.StateRevision), "", nil
	}
	prev, after := "", from
	if from > 0 {
		evs, err := st.ListEvents(ctx, r.TenantID, r.RunID, from-1, 1)
		if err != nil {
			return total, "", "", fmt.Errorf("resume run %s: read events: %w", r.RunID, err)
		}
		if len(evs) == 0 || evs[0].Seq != from {
			return total, fmt.Sprintf("event %d, verified before, is missing", from), "", nil
		}
		prev = evs[0].Chain
	}
	for {
		evs, err := st.ListEvents(ctx, r.TenantID, r.RunID, after, run.MaxListLimit)
		if err != nil {
			return total, "", "", fmt.Errorf("resume run %s: read events: %w", r.RunID, err)
		}
		if prev, after, err = run.CheckChain(prev, after, evs); err != nil {
			return total, err.Error(), "", nil
		}
		if len(evs) < run.MaxListLimit {
			break
		}
	}
	if after != r.StateRevision {
		return total, fmt.Sprintf("the log ends at seq %d, the run is at revision %d", after, r.StateRevision), "", nil
	}
	if prev != r.Chain {
		return total, fmt.Sprintf("the run's chain head differs from that of event %d", after), "", nil
	}
	last, err := st.GetEvent(ctx, r.TenantID, r.RunID, after)
	if err != nil {
		return total, "", "", fmt.Errorf("resume run %s: read event %d: %w", r.RunID, after, err)
	}
	if d1, d2 := run.Digest(last.State), run.Digest(r.State); d1 != d2 {
		return total, fmt.Sprintf("materialized state %s differs from the snapshot of event %d (%s)", d2, after, d1), "", nil
	}
	if last.NextStep != r.NextStep {
		return total, fmt.Sprintf("next step %q differs from the snapshot of event %d (%q)", r.NextStep, after, last.NextStep), "", nil
	}
	if last.StateSchemaVersion != 0 && last.StateSchemaVersion != r.StateSchemaVersion {
		return total, fmt.Sprintf("schema v%d differs from the snapshot of event %d (v%d)", r.StateSchemaVersion, after, last.StateSchemaVersion), "", nil
	}
	verified := fmt.Sprintf("events %d..%d follow the hash chain (1..%d verified before), state matches the last event", from+1, after, from)
	if r.Spent != nil {
		b, _ := json.Marshal(r.Spent)
		if err := json.Unmarshal(b, &total); err != nil {
			return total, fmt.Sprintf("spend totals unreadable: %v", err), "", nil
		}
		return total, "", verified, nil
	}
	total, err = v.sumSpend(ctx, r)
	return total, "", verified, err
}

// sumSpend adds up the spend of every event payload, for a run from before
// running totals were kept.
func (v *Verifier) sumSpend(ctx context.Context, r run.Run) (control.Spend, error) {
	var total control.Spend
	var after int64
	for {
		evs, err := v.Runs.Store().ListEvents(ctx, r.TenantID, r.RunID, after, run.MaxListLimit)
		if err != nil {
			return total, fmt.Errorf("resume run %s: read events: %w", r.RunID, err)
		}
		for _, ev := range evs {
			after = ev.Seq
			var p struct {
				Spend *control.Spend `json:"spend"`
			}
			if len(ev.Payload) > 0 && json.Unmarshal(ev.Payload, &p) == nil && p.Spend != nil {
				total = total.Add(*p.Spend)
			}
		}
		if len(evs) < run.MaxListLimit {
			return total, nil
		}
	}
}
