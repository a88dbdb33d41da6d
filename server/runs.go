package server

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
)

var runSentinels = []sentinel{
	{run.ErrNotFound, problem.RunNotFound, 0},
	{run.ErrAlreadyExists, problem.AlreadyExists, 0},
	{run.ErrIdempotencyMismatch, problem.IdempotencyMismatch, 0},
	{run.ErrRevisionConflict, problem.RevisionConflict, 0},
	{run.ErrLeaseHeld, problem.LeaseHeld, 0},
	{run.ErrLeaseLost, problem.LeaseLost, 0},
	{run.ErrInvalidTransition, problem.InvalidTransition, 0},
	{run.ErrRunNotActive, problem.RunNotActive, 0},
	{run.ErrStateTooLarge, problem.StateTooLarge, 0},
	// Well-formed JSON the domain refuses: 422, where malformed JSON is 400.
	{run.ErrInvalidInput, problem.InvalidRequest, http.StatusUnprocessableEntity},
	{run.ErrNoMigrationPath, problem.NoMigrationPath, 0},
	{run.ErrSchemaValidation, problem.SchemaValidation, 0},
	{run.ErrCheckpointExists, problem.CheckpointExists, 0},
	{run.ErrCheckpointNotFound, problem.CheckpointNotFound, 0},
	{run.ErrRevisionNotFound, problem.RevisionNotFound, 0},
}

// DefaultLeaseTTL applies when a lease request names no ttl_ms.
const DefaultLeaseTTL = 30 * time.Second

func (s *Server) runRoutes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/runs", Handler: s.createRun},
		{Method: http.MethodGet, Path: "/v1/runs", Handler: s.listRuns},
		{Method: http.MethodGet, Path: "/v1/runs/{run_id}", Handler: s.getRun},
		{Method: http.MethodGet, Path: "/v1/runs/{run_id}/events", Handler: s.listEvents},
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/lease", Handler: s.acquireLease},
		{Method: http.MethodDelete, Path: "/v1/runs/{run_id}/lease", Handler: s.releaseLease},
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/commit", Handler: s.commit, IfMatch: true},
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/checkpoints", Handler: s.createCheckpoint},
		{Method: http.MethodGet, Path: "/v1/runs/{run_id}/checkpoints", Handler: s.listCheckpoints},
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/fork", Handler: s.forkRun},
	}
}

// runID reads the path's run id. Validation is the service's; an id that
// cannot exist is simply not found.
func runID(r *http.Request) string { return r.PathValue("run_id") }

// clampLimit keeps a parsed limit inside int while leaving an over-limit
// value over the limit, so the service refuses it with its own message.
func clampLimit(n int64) int { return int(min(n, run.MaxListLimit+1)) }

func revisionETag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

func runLocation(id string) string { return "/v1/runs/" + url.PathEscape(id) }

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) error {
	var req run.CreateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	rn, created, err := s.runs.Create(r.Context(), tenant(r), req, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	w.Header().Set("Location", runLocation(rn.RunID))
	w.Header().Set("ETag", revisionETag(rn.StateRevision))
	if !created {
		// The same request came before under this key: the same answer again.
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, rn)
	return nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	runs, next, err := s.runs.List(r.Context(), tenant(r), run.Status(q.Get("status")), q.Get("workflow"), q.Get("cursor"), clampLimit(limit))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(runs, next))
	return nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	rn, err := s.runs.Get(r.Context(), tenant(r), runID(r))
	if err != nil {
		return err
	}
	writeJSONTagged(w, r, revisionETag(rn.StateRevision), rn)
	return nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	after, err := queryInt(q, "after")
	if err != nil {
		return err
	}
	// The list's cursor, as every list takes one: the seq of the last
	// event of the page before (what next_cursor says).
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			return unprocessable("cursor is not one this list gave: pass next_cursor as it came")
		}
		if q.Has("after") && n != after {
			return unprocessable("give cursor or after, not both")
		}
		after = n
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	evs, err := s.runs.Events(r.Context(), tenant(r), runID(r), after, clampLimit(limit))
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = run.DefaultListSize
	}
	next := ""
	if len(evs) > 0 && len(evs) == int(limit) {
		// A full page may have more after it; the cursor is the seq to pass as after.
		next = strconv.FormatInt(evs[len(evs)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, listOf(evs, next))
	return nil
}

// LeaseRequest acquires (epoch 0 or absent) or renews (the held epoch) a lease.
type LeaseRequest struct {
	Owner string `json:"owner"`
	TTLMs int64  `json:"ttl_ms,omitempty"`
	Epoch int64  `json:"epoch,omitempty"`
	// Operator takes a run a refused resume suspended, to settle by a
	// commit what the refusal names (or end the run); it needs the admin
	// role. A worker's lease on such a run is refused.
	Operator bool `json:"operator,omitempty"`
}

// ReleaseRequest gives back the lease exactly as it was granted.
type ReleaseRequest struct {
	Lease run.Lease `json:"lease"`
}

// leaseTTL reads a request's ttl_ms: 0 means DefaultLeaseTTL.
func leaseTTL(ms int64) (time.Duration, error) {
	if ms == 0 {
		return DefaultLeaseTTL, nil
	}
	// Range-check in milliseconds first so a huge value cannot overflow a Duration.
	if ms < run.MinLeaseTTL.Milliseconds() || ms > run.MaxLeaseTTL.Milliseconds() {
		return 0, unprocessable("ttl_ms must be between %d and %d", run.MinLeaseTTL.Milliseconds(), run.MaxLeaseTTL.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// operatorOwner prefixes the owner of an operator's lease.
const operatorOwner = "operator:"

func (s *Server) acquireLease(w http.ResponseWriter, r *http.Request) error {
	var req LeaseRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	ttl, err := leaseTTL(req.TTLMs)
	if err != nil {
		return err
	}
	if p, _ := PrincipalFrom(r.Context()); req.Operator && s.keys.Len() > 0 && p.Role < RoleAdmin {
		return newError(problem.Forbidden, "an operator's lease needs the admin role")
	}
	if req.Operator && !strings.HasPrefix(req.Owner, operatorOwner) {
		// Marked, so that its commits keep the run held (commit).
		req.Owner = operatorOwner + req.Owner
	}
	l, err := s.runs.AcquireLease(r.Context(), tenant(r), runID(r), req.Owner, req.Epoch, ttl)
	if err != nil {
		return err
	}
	// A run a refused resume suspended waits for an operator: a plain
	// lease would let a worker carry on past the check that refused it.
	// Read under the lease, the status is final (only a lease holder moves it).
	rn, err := s.runs.Get(r.Context(), tenant(r), runID(r))
	if err != nil {
		return err
	}
	if resume.HeldForOperator(rn) && !req.Operator {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := s.runs.ReleaseLease(rctx, tenant(r), runID(r), l); err != nil && !errors.Is(err, run.ErrLeaseLost) {
			return err
		}
		return newError(problem.RunNotActive, fmt.Sprintf("run %s is suspended for an operator (%s); settle what it names, then POST /v1/runs/%s/resume, which verifies before it leases (an operator settles it in the state with a lease taken with \"operator\": true)", runID(r), rn.StatusReason, runID(r)))
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request) error {
	var req ReleaseRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := s.runs.ReleaseLease(r.Context(), tenant(r), runID(r), req.Lease); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// CommitResponse is the run as committed and the event the commit appended.
type CommitResponse struct {
	Run   run.Run   `json:"run"`
	Event run.Event `json:"event"`
}

func (s *Server) commit(w http.ResponseWriter, r *http.Request) error {
	var req run.CommitRequest
	body, err := s.readJSONObject(w, r)
	if err != nil {
		return err
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	// ifMatch: the header alone names the revision (the body has none), so
	// a stale one is a failed precondition (412); an expected_revision in
	// the body is the run's own revision race (409), header or not.
	ifMatch := false
	if im := ifMatchHeader(r); im != "" {
		rev, err := ifMatchRevision(im, req.ExpectedRevision)
		if err != nil {
			return err
		}
		ifMatch = req.ExpectedRevision == 0 && strings.TrimSpace(im) != "*"
		req.ExpectedRevision = rev
	}
	if strings.HasPrefix(req.Lease.Owner, operatorOwner) {
		if cur, err := s.runs.Get(r.Context(), tenant(r), runID(r)); err == nil && resume.HeldForOperator(cur) {
			// Settling a held run is the operator's (admin role), as taking
			// its lease is: the lease is no credential (anyone who reads
			// the run can rebuild it).
			if p, _ := PrincipalFrom(r.Context()); s.keys.Len() > 0 && p.Role < RoleAdmin {
				return newError(problem.Forbidden, "a commit under an operator's lease needs the admin role")
			}
			// An operator's commit that leaves the run suspended keeps it
			// held: only a resume that passes its checks lets workers take
			// it again. A reason the operator gives (a note) is kept after
			// the refusal's, which stays first: it is what holds the run,
			// and names the check.
			if (req.Status == "" || req.Status == run.StatusSuspended) && !strings.HasPrefix(req.StatusReason, resume.RefusalPrefix) {
				req.StatusReason = heldReason(cur.StatusReason, req.StatusReason)
			}
		}
	}
	rn, ev, err := s.runs.Commit(r.Context(), tenant(r), runID(r), req)
	if err != nil {
		if outcomeUnknown(err) {
			return commitOutcomeUnknown(err, runLocation(runID(r)))
		}
		if ifMatch && errors.Is(err, run.ErrRevisionConflict) {
			// A failed If-Match is 412 (RFC 9110, DESIGN); the body's
			// expected_revision alone is the run's own 409.
			return &apiError{kind: problem.PreconditionFailed, detail: fmt.Sprintf("If-Match %s is not the run's revision", ifMatchHeader(r)), cause: err}
		}
		switch {
		case errors.Is(err, run.ErrRevisionConflict):
			s.metrics.commitConflicts.WithLabelValues(conflictRevision).Inc()
		case errors.Is(err, run.ErrLeaseLost):
			s.metrics.commitConflicts.WithLabelValues(conflictLease).Inc()
		case errors.Is(err, run.ErrInvalidTransition):
			s.metrics.commitConflicts.WithLabelValues(conflictTransition).Inc()
		}
		return err
	}
	s.metrics.commits.Inc()
	w.Header().Set("ETag", revisionETag(rn.StateRevision))
	writeCommit(w, preferMinimal(r), &rn, &ev)
	return nil
}

// commitBufs recycles response buffers: a commit answer is written out
// before writeCommit returns, and commits are the hot path of the API.
var commitBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// responseJSON is how answers are encoded: encoding/json's member rules
// (omitempty omits zero numbers too), no HTML escaping, so a state full of
// '<' and '&' costs what plain text does.
var responseJSON = jsonv2.JoinOptions(jsonv1.OmitEmptyWithLegacySemantics(true), jsontext.EscapeForHTML(false))

// MinimalCommitResponse is the answer to a commit sent with
// Prefer: return=minimal (RFC 7240): what a caller needs to go on,
// without the state it just sent.
type MinimalCommitResponse struct {
	Run struct {
		RunID         string     `json:"run_id"`
		StateRevision int64      `json:"state_revision"`
		Status        run.Status `json:"status"`
		NextStep      string     `json:"next_step"`
	} `json:"run"`
	Event struct {
		Seq int64 `json:"seq"`
	} `json:"event"`
}

// writeCommit answers 200 with the commit response, whole or minimal.
func writeCommit(w http.ResponseWriter, minimal bool, rn *run.Run, ev *run.Event) {
	buf := commitBufs.Get().(*bytes.Buffer)
	defer commitBufs.Put(buf)
	buf.Reset()
	var v any = &CommitResponse{Run: *rn, Event: *ev}
	if minimal {
		m := &MinimalCommitResponse{}
		m.Run.RunID, m.Run.StateRevision, m.Run.Status, m.Run.NextStep = rn.RunID, rn.StateRevision, rn.Status, rn.NextStep
		m.Event.Seq = ev.Seq
		v = m
		w.Header().Set("Preference-Applied", "return=minimal")
	}
	if err := jsonv2.MarshalWrite(buf, v, responseJSON); err != nil {
		writeJSON(w, http.StatusOK, v) // answers the encoding problem
		return
	}
	buf.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	if buf.Cap() > 64<<10 {
		*buf = bytes.Buffer{} // do not keep a huge state's buffer in the pool
	}
}

// preferMinimal reports whether the request's Prefer header asks for
// return=minimal (RFC 7240; preferences are comma-separated tokens).
func preferMinimal(r *http.Request) bool {
	for _, h := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(h, ",") {
			name, _, _ := strings.Cut(pref, ";")
			if strings.EqualFold(strings.ReplaceAll(strings.TrimSpace(name), " ", ""), "return=minimal") {
				return true
			}
		}
	}
	return false
}

// ifMatchRevision reconciles an If-Match header with the body's
// expected_revision: they must agree (412 otherwise); if the body has none,
// the header supplies it. "*" adds no constraint.
func ifMatchRevision(header string, expected int64) (int64, error) {
	header = strings.TrimSpace(header)
	if header == "*" {
		return expected, nil
	}
	var revs []int64
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		rev, ok := parseRevisionETag(tag)
		if !ok {
			return 0, newError(problem.PreconditionFailed, fmt.Sprintf("If-Match %q is not a revision ETag of this API (a quoted integer such as \"3\"; weak tags never match)", tag))
		}
		revs = append(revs, rev)
	}
	if expected == 0 {
		if len(revs) != 1 {
			return 0, badRequest("If-Match lists several revisions; name one, or set expected_revision")
		}
		return revs[0], nil
	}
	for _, rev := range revs {
		if rev == expected {
			return expected, nil
		}
	}
	return 0, newError(problem.PreconditionFailed, fmt.Sprintf("If-Match %s does not agree with expected_revision %d", header, expected))
}

// parseRevisionETag reads a strong ETag made by revisionETag.
func parseRevisionETag(tag string) (int64, bool) {
	if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(tag[1:len(tag)-1], 10, 64)
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

// writeJSONTagged answers 200 with v and its etag, or 304 with no body when
// If-None-Match already names etag.
func writeJSONTagged(w http.ResponseWriter, r *http.Request, etag string, v any) {
	w.Header().Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagListMatches(inm, etag, true) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// etagListMatches reports whether a header's ETag list names etag; weak
// comparison (for If-None-Match) ignores a W/ prefix.
func etagListMatches(header, etag string, weak bool) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			return true
		}
		if weak {
			tag = strings.TrimPrefix(tag, "W/")
		}
		if tag == etag {
			return true
		}
	}
	return false
}

// CheckpointRequest labels a revision; revision 0 or absent means the current one.
type CheckpointRequest struct {
	Label    string `json:"label"`
	Revision int64  `json:"revision,omitempty"`
}

func (s *Server) createCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req CheckpointRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	cp, created, err := s.runs.CheckpointKeyed(r.Context(), tenant(r), runID(r), req.Label, req.Revision, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, cp)
	return nil
}

func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	cps, next, err := s.runs.Checkpoints(r.Context(), tenant(r), runID(r), q.Get("cursor"), clampLimit(limit))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(cps, next))
	return nil
}

func (s *Server) forkRun(w http.ResponseWriter, r *http.Request) error {
	var req run.ForkRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	rn, created, err := s.runs.ForkKeyed(r.Context(), tenant(r), runID(r), req, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	w.Header().Set("Location", runLocation(rn.RunID))
	w.Header().Set("ETag", revisionETag(rn.StateRevision))
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, rn)
	return nil
}

// heldReason is the status reason of a held run after an operator's commit
// that leaves it suspended: the refusal's reason, then the operator's note,
// within the status reason's limit.
func heldReason(refusal, note string) string {
	if note == "" || len(note) > maxStatusReason {
		return cmp.Or(note, refusal) // one too long is refused as it is
	}
	out := refusal + " (operator: " + note + ")"
	if len(out) > maxStatusReason {
		out = strings.ToValidUTF8(out[:maxStatusReason], "")
	}
	return out
}

// maxStatusReason is the longest status reason a commit takes (run.Service).
const maxStatusReason = 4096
