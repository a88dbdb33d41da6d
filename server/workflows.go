package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
)

var workflowSentinels = []sentinel{
	{run.ErrSchemaNotFound, problem.SchemaNotFound, 0},
	{run.ErrSchemaConflict, problem.SchemaConflict, 0},
	{run.ErrInvalidSchema, problem.InvalidSchema, 0},
}

// Registered state schemas: per tenant, workflow and version, immutable
// once registered. A PUT of the schema already registered answers 200 and
// changes nothing; of a new version 201; of another schema for a
// registered version 409 schema-conflict (register a new version instead).
func (s *Server) workflowRoutes() []Route {
	return []Route{
		{Method: http.MethodPut, Path: "/v1/workflows/{workflow_name}/schemas/{version}", Handler: s.putSchema},
		{Method: http.MethodGet, Path: "/v1/workflows/{workflow_name}/schemas/{version}", Handler: s.getSchema},
		{Method: http.MethodGet, Path: "/v1/workflows/{workflow_name}/schemas", Handler: s.listSchemas},
	}
}

func schemaLocation(workflow string, version int) string {
	return "/v1/workflows/" + url.PathEscape(workflow) + "/schemas/" + strconv.Itoa(version)
}

// schemaVersion reads the path's version: a positive 32-bit integer.
func schemaVersion(r *http.Request) (int, error) {
	raw := r.PathValue("version")
	v, err := strconv.ParseInt(raw, 10, 32)
	// One spelling per version: "01" or "+1" read as 1 would answer for a
	// path that names no version of its own.
	if err != nil || v < 1 || strconv.FormatInt(v, 10) != raw {
		return 0, newError(problem.InvalidRequest, "version must be a positive integer below 2^31")
	}
	return int(v), nil
}

func (s *Server) putSchema(w http.ResponseWriter, r *http.Request) error {
	v, err := schemaVersion(r)
	if err != nil {
		return err
	}
	// The same checks as every JSON body: one object, UTF-8, no NUL, bounded depth.
	body, err := s.readJSONObject(w, r)
	if err != nil {
		return err
	}
	sc, created, err := s.runs.PutSchema(r.Context(), tenant(r), r.PathValue("workflow_name"), v, body)
	if err != nil {
		return err
	}
	w.Header().Set("Location", schemaLocation(sc.WorkflowName, sc.Version))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, sc)
	return nil
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	v, err := schemaVersion(r)
	if err != nil {
		return err
	}
	sc, err := s.runs.GetSchema(r.Context(), tenant(r), r.PathValue("workflow_name"), v)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Server) listSchemas(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	items, next, err := s.runs.ListSchemas(r.Context(), tenant(r), r.PathValue("workflow_name"), q.Get("cursor"), clampLimit(limit))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(items, next))
	return nil
}
