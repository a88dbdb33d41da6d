package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/problem"
)

var summarySentinels = []sentinel{
	{compact.ErrNotFound, problem.SummaryNotFound, 0},
	{compact.ErrRange, problem.SummaryRange, 0},
	{compact.ErrCompactorFailed, problem.CompactorFailed, 0},
	{compact.ErrUnknownCompactor, problem.InvalidRequest, http.StatusUnprocessableEntity},
	{compact.ErrInvalidInput, problem.InvalidRequest, http.StatusUnprocessableEntity},
	{compact.ErrNoSource, problem.InvalidRequest, http.StatusUnprocessableEntity},
	// A taken id cannot come from the API (ids are generated); a race on
	// the same next range is answered as ErrRange by the service.
	{compact.ErrAlreadyExists, problem.SummaryRange, 0},
}

// Summaries of a run's events: a rebuildable cache, never a source of
// truth. The routes exist when Options.Summaries is set.
func (s *Server) summaryRoutes() []Route {
	if s.summaries == nil {
		return nil
	}
	return []Route{
		{Method: http.MethodPost, Path: "/v1/runs/{run_id}/summaries", Handler: s.createSummary},
		{Method: http.MethodGet, Path: "/v1/runs/{run_id}/summaries", Handler: s.listSummaries},
		{Method: http.MethodGet, Path: "/v1/summaries/{summary_id}", Handler: s.getSummary},
		// A GET although it may mark the summary stale: that changes only
		// the cache, and a reader must be able to check what it is shown.
		{Method: http.MethodGet, Path: "/v1/summaries/{summary_id}/verify", Handler: s.verifySummary},
	}
}

func summaryLocation(id string) string { return "/v1/summaries/" + url.PathEscape(id) }

// CreateSummaryRequest asks for a summary of a run's events. Absent
// from_seq continues the chain; absent to_seq runs to the last event;
// compactor is "extractive" (default) or "llm" when configured.
type CreateSummaryRequest struct {
	FromSeq   int64  `json:"from_seq,omitempty"`
	ToSeq     int64  `json:"to_seq,omitempty"`
	Compactor string `json:"compactor,omitempty"`
}

func (s *Server) createSummary(w http.ResponseWriter, r *http.Request) error {
	var req CreateSummaryRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkText("compactor", req.Compactor); err != nil {
		return err
	}
	sum, created, err := s.summaries.Compact(r.Context(), tenant(r), compact.RunOwner(runID(r)),
		compact.CompactRequest{FromSeq: req.FromSeq, ToSeq: req.ToSeq, Compactor: req.Compactor})
	if err != nil {
		return err
	}
	w.Header().Set("Location", summaryLocation(sum.SummaryID))
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // that range was summarised by that compactor already
	}
	writeJSON(w, status, sum)
	return nil
}

func (s *Server) listSummaries(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	// The run must exist (and be the tenant's): an unknown run is 404, not an empty list.
	if _, err := s.runs.Get(r.Context(), tenant(r), runID(r)); err != nil {
		return err
	}
	items, next, err := s.summaries.List(r.Context(), tenant(r), compact.RunOwner(runID(r)), q.Get("cursor"), int(min(limit, compact.MaxListLimit+1)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(items, next))
	return nil
}

func (s *Server) getSummary(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.summaries.Get(r.Context(), tenant(r), r.PathValue("summary_id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", `"`+strconv.Itoa(sum.Version)+"-"+string(sum.Status)+`"`)
	writeJSON(w, http.StatusOK, sum)
	return nil
}

func (s *Server) verifySummary(w http.ResponseWriter, r *http.Request) error {
	v, err := s.summaries.Verify(r.Context(), tenant(r), r.PathValue("summary_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
