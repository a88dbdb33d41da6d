package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

var operationSentinels = []sentinel{
	{toolop.ErrNotFound, problem.OperationNotFound, 0},
	{toolop.ErrDigestMismatch, problem.DigestMismatch, 0},
	{toolop.ErrInvalidTransition, problem.OperationTransition, 0},
	{toolop.ErrInvalidInput, problem.InvalidRequest, http.StatusUnprocessableEntity},
	{toolop.ErrApprovalNotFound, problem.ApprovalNotFound, 0},
	{toolop.ErrApprovalExists, problem.ApprovalExists, 0},
	{toolop.ErrApprovalDecided, problem.ApprovalDecided, 0},
	{toolop.ErrApprovalExpired, problem.ApprovalExpired, 0},
}

func (s *Server) operationRoutes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/resume", Handler: s.resumeRun},
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/operations", Handler: s.prepareOperation},
		{Method: http.MethodGet, Path: "/v1/runs/{run_id}/operations", Handler: s.listOperations},
		{Method: http.MethodGet, Path: "/v1/operations/{operation_id}", Handler: s.getOperation},
		{Method: http.MethodPost, Path: "/v1/operations/{operation_id}/{transition}", Handler: s.transitionOperation},
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/approvals", Handler: s.requestApproval},
		{Method: http.MethodGet, Path: "/v1/runs/{run_id}/approvals", Handler: s.listApprovals},
		{Method: http.MethodGet, Path: "/v1/approvals/{approval_id}", Handler: s.getApproval},
		{Method: http.MethodPost, Path: "/v1/approvals/{approval_id}/decision", Handler: s.decideApproval, Role: RoleAdmin},
	}
}

// ResumeRequest asks to verify a run and take its lease.
type ResumeRequest struct {
	Owner            string `json:"owner"`
	TTLMs            int64  `json:"ttl_ms,omitempty"`
	ExpectedRevision int64  `json:"expected_revision,omitempty"`
	// SuspendOnRefusal, when true, suspends a run whose resume is refused
	// (naming the check), for an operator, so no other worker takes it up
	// meanwhile (DESIGN rule 4); by default a refusal leaves it as it was.
	SuspendOnRefusal bool `json:"suspend_on_refusal,omitempty"`
}

// resumeRefusal is the 422 body: a problem with the checks that ran.
type resumeRefusal struct {
	Problem
	FailedCheck string         `json:"failed_check"`
	Checks      []resume.Check `json:"checks"`
	Run         run.Run        `json:"run"`
}

func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request) error {
	var req ResumeRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	ttl, err := leaseTTL(req.TTLMs)
	if err != nil {
		return err
	}
	if err := run.ValidID("owner", req.Owner); err != nil {
		return err
	}
	v := &resume.Verifier{Runs: s.runs, Ops: s.ops}
	res, err := v.Resume(r.Context(), resume.Request{TenantID: tenant(r), RunID: runID(r), Owner: req.Owner, LeaseTTL: ttl, ExpectedRevision: req.ExpectedRevision, SuspendOnRefusal: req.SuspendOnRefusal})
	if errors.Is(err, resume.ErrRefused) {
		ri := infoOf(r)
		k, _ := problem.Lookup(problem.ResumeRefused)
		ri.problem = problem.ResumeRefused
		body := resumeRefusal{
			Problem:     Problem{Type: problem.Type(problem.ResumeRefused), Title: k.Title, Status: k.Status, Detail: res.Reason, Instance: r.URL.Path, RequestID: ri.id},
			FailedCheck: res.FailedCheck, Checks: res.Checks, Run: res.Run,
		}
		writeProblemBody(w, k.Status, body)
		return nil
	}
	if err != nil {
		return err
	}
	w.Header().Set("ETag", revisionETag(res.Run.StateRevision))
	writeJSON(w, http.StatusOK, res)
	return nil
}

// PrepareOperationRequest prepares an operation of a run once. Without an
// operation_id, one is derived from the run id and business_key.
type PrepareOperationRequest struct {
	OperationID   string `json:"operation_id,omitempty"`
	BusinessKey   string `json:"business_key,omitempty"`
	StepID        string `json:"step_id"`
	ToolName      string `json:"tool_name"`
	RequestDigest string `json:"request_digest"`
}

func operationLocation(id string) string { return "/v1/operations/" + url.PathEscape(id) }

func (s *Server) prepareOperation(w http.ResponseWriter, r *http.Request) error {
	var req PrepareOperationRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	rn, err := s.runs.Get(r.Context(), tenant(r), runID(r))
	if err != nil {
		return err
	}
	if rn.Status.Terminal() {
		return runEnded(rn, "it takes no new operations")
	}
	if req.OperationID == "" {
		if req.BusinessKey == "" {
			return unprocessable("name operation_id or business_key")
		}
		if len(req.BusinessKey) > MaxIDBytes {
			return unprocessable("business_key is longer than %d bytes", MaxIDBytes)
		}
		req.OperationID = toolop.OperationID(rn.RunID, req.BusinessKey)
	}
	op, created, err := s.ops.Prepare(r.Context(), tenant(r), toolop.PrepareRequest{
		OperationID: req.OperationID, RunID: rn.RunID, StepID: req.StepID, ToolName: req.ToolName, RequestDigest: req.RequestDigest,
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", operationLocation(op.OperationID))
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, op)
	return nil
}

func (s *Server) listOperations(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.runs.Get(r.Context(), tenant(r), runID(r)); err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	ops, next, err := s.ops.ListPage(r.Context(), tenant(r), runID(r), q.Get("cursor"), int(min(limit, toolop.MaxListLimit+1)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(ops, next))
	return nil
}

func (s *Server) getOperation(w http.ResponseWriter, r *http.Request) error {
	op, err := s.ops.Get(r.Context(), tenant(r), r.PathValue("operation_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, op)
	return nil
}

// OperationTransitionRequest is the body of POST /v1/operations/{id}/{transition}.
// started takes no fields; succeeded takes external_ref and result; failed
// and unknown take error; resolve (an operator settling an in-doubt
// operation) takes outcome, by, reason and the rest.
type OperationTransitionRequest struct {
	ExternalRef string          `json:"external_ref,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	Outcome     string          `json:"outcome,omitempty"`
	By          string          `json:"by,omitempty"`
	Reason      string          `json:"reason,omitempty"`
}

// given names the fields of the request that are set.
func (req OperationTransitionRequest) given() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"external_ref", req.ExternalRef != ""}, {"result", len(req.Result) > 0}, {"error", req.Error != ""},
		{"outcome", req.Outcome != ""}, {"by", req.By != ""}, {"reason", req.Reason != ""}} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// transitionFields are the fields each transition records.
var transitionFields = map[string][]string{
	"started":   nil,
	"succeeded": {"external_ref", "result"},
	"failed":    {"external_ref", "result", "error"},
	"unknown":   {"error"},
	"resolve":   {"outcome", "external_ref", "result", "error", "by", "reason"},
}

func (s *Server) transitionOperation(w http.ResponseWriter, r *http.Request) error {
	var req OperationTransitionRequest
	// The body is optional (started takes none), sent with a length or
	// streamed: an empty one is no body either way.
	if _, err := s.decodeOptionalJSON(w, r, &req); err != nil {
		return err
	}
	ctx, tn, id := r.Context(), tenant(r), r.PathValue("operation_id")
	tr := r.PathValue("transition")
	if takes, ok := transitionFields[tr]; ok {
		// A field the transition does not record was dropped without a
		// word: a success sent with an error read as a plain success.
		for _, name := range req.given() {
			if !slices.Contains(takes, name) {
				return unprocessable("%s does not take %s: it records %s", tr, name, cmp.Or(strings.Join(takes, ", "), "nothing"))
			}
		}
	}
	var op toolop.Operation
	var err error
	switch tr {
	case "started":
		// Starting is about to perform the side effect: not for a run that
		// ended (a worker that missed the cancel). Settling one already in
		// flight stays open: it records what happened.
		if err := s.runActive(ctx, tn, id); err != nil {
			return err
		}
		op, err = s.ops.Start(ctx, tn, id)
	case "succeeded":
		op, err = s.ops.Succeed(ctx, tn, id, toolop.Outcome{ExternalRef: req.ExternalRef, Result: req.Result})
	case "failed":
		op, err = s.ops.Fail(ctx, tn, id, toolop.Outcome{ExternalRef: req.ExternalRef, Result: req.Result, Error: req.Error})
	case "unknown":
		op, err = s.ops.MarkUnknown(ctx, tn, id, req.Error)
	case "resolve":
		if p, _ := PrincipalFrom(ctx); s.keys.Len() > 0 && p.Role < RoleAdmin {
			return newError(problem.Forbidden, "resolving an operation by hand needs the admin role")
		}
		op, err = s.ops.Resolve(ctx, tn, id, toolop.Resolution{Outcome: req.Outcome, ExternalRef: req.ExternalRef, Result: req.Result, Error: req.Error, By: req.By, Reason: req.Reason})
	default:
		return newError(problem.OperationUnsupported, "transition "+strconv.Quote(tr)+" is not one of started, succeeded, failed, unknown, resolve")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, op)
	return nil
}

// runEnded is the run-not-active answer for a run that ended, saying what
// it no longer does.
func runEnded(rn run.Run, what string) error {
	return &apiError{kind: problem.RunNotActive, detail: "run " + rn.RunID + " is " + string(rn.Status) + "; " + what}
}

// runActive refuses with run-not-active when the run of an operation ended.
func (s *Server) runActive(ctx context.Context, tenantID, operationID string) error {
	op, err := s.ops.Get(ctx, tenantID, operationID)
	if err != nil {
		return err
	}
	rn, err := s.runs.Get(ctx, tenantID, op.RunID)
	if err != nil {
		return err
	}
	if rn.Status.Terminal() {
		return runEnded(rn, "its operations are not started any more")
	}
	return nil
}

// ApprovalCreateRequest asks for an approval of a run's step.
type ApprovalCreateRequest struct {
	ApprovalID    string          `json:"approval_id,omitempty"`
	StepID        string          `json:"step_id"`
	RequestDigest string          `json:"request_digest"`
	Summary       json.RawMessage `json:"summary,omitempty"`
	TTLMs         int64           `json:"ttl_ms"`
}

// ApprovalView is an approval with its effective status (pending past its
// expiry reads "expired").
type ApprovalView struct {
	toolop.Approval
	Effective string `json:"effective_status"`
}

func (s *Server) view(a toolop.Approval) ApprovalView {
	return ApprovalView{Approval: a, Effective: a.Effective(s.ops.Now())}
}

func (s *Server) requestApproval(w http.ResponseWriter, r *http.Request) error {
	var req ApprovalCreateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	rn, err := s.runs.Get(r.Context(), tenant(r), runID(r))
	if err != nil {
		return err
	}
	if rn.Status.Terminal() {
		return runEnded(rn, "it takes no new approvals")
	}
	if req.TTLMs <= 0 || req.TTLMs > toolop.MaxApprovalTTL.Milliseconds() {
		return unprocessable("ttl_ms must be positive and at most %d", toolop.MaxApprovalTTL.Milliseconds())
	}
	a, created, err := s.ops.RequestApproval(r.Context(), tenant(r), toolop.ApprovalRequest{
		ApprovalID: req.ApprovalID, RunID: rn.RunID, StepID: req.StepID, RequestDigest: req.RequestDigest,
		Summary: req.Summary, TTL: time.Duration(req.TTLMs) * time.Millisecond,
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/approvals/"+url.PathEscape(a.ApprovalID))
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, s.view(a))
	return nil
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.runs.Get(r.Context(), tenant(r), runID(r)); err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	as, next, err := s.ops.ListApprovalsPage(r.Context(), tenant(r), runID(r), q.Get("cursor"), int(min(limit, toolop.MaxListLimit+1)))
	if err != nil {
		return err
	}
	views := make([]ApprovalView, 0, len(as))
	for _, a := range as {
		views = append(views, s.view(a))
	}
	writeJSON(w, http.StatusOK, listOf(views, next))
	return nil
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) error {
	a, err := s.ops.GetApproval(r.Context(), tenant(r), r.PathValue("approval_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(a))
	return nil
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		// A pointer, so that a decision that says neither is refused:
		// taken as false it would be a rejection no later call can undo.
		Approve *bool  `json:"approve"`
		By      string `json:"by"`
		Reason  string `json:"reason,omitempty"`
	}
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Approve == nil {
		return unprocessable("approve is required: true to approve, false to reject")
	}
	// A run that ended asks nothing any more: deciding for it would record
	// an approval no step will ever use.
	cur, err := s.ops.GetApproval(r.Context(), tenant(r), r.PathValue("approval_id"))
	if err != nil {
		return err
	}
	if cur.Status == toolop.ApprovalPending {
		if rn, err := s.runs.Get(r.Context(), tenant(r), cur.RunID); err == nil && rn.Status.Terminal() {
			return runEnded(rn, "its approvals are not decided any more")
		}
	}
	d := toolop.Decision{Approve: *in.Approve, By: in.By, Reason: in.Reason}
	a, err := s.ops.Decide(r.Context(), tenant(r), r.PathValue("approval_id"), d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(a))
	return nil
}
