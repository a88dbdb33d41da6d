package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/session"
)

// BuildContext builds a model context on the server (POST /v1/context).
// A budget that does not hold the system part, the tools and the query is
// contextbuild.ErrBudgetTooSmall; other bad input contextbuild.ErrInvalidInput.
func (c *Client) BuildContext(ctx context.Context, r contextbuild.Request) (contextbuild.Result, error) {
	tools := make([]map[string]any, len(r.Tools))
	for i, t := range r.Tools {
		tools[i] = map[string]any{"name": t.Name, "description": t.Description}
		if len(t.Parameters) > 0 {
			tools[i]["parameters"] = t.Parameters
		}
	}
	body := map[string]any{"model": r.Model, "budget_tokens": r.BudgetTokens, "reserve_tokens": r.ReserveTokens,
		"system": r.System, "query": r.Query, "session_id": r.SessionID, "user_id": r.UserID, "run_id": r.RunID,
		"subject_id": r.SubjectID, "principal": r.Principal, "memory_k": r.MemoryK, "tools": tools}
	var out struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Accounting contextbuild.Accounting `json:"accounting"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/context", body: body}, &out); err != nil {
		return contextbuild.Result{}, contextErr(err)
	}
	res := contextbuild.Result{Messages: make([]llm.Message, len(out.Messages)), Accounting: out.Accounting}
	for i, m := range out.Messages {
		res.Messages[i] = llm.Message{Role: llm.Role(m.Role), Content: m.Content}
	}
	return res, nil
}

func contextErr(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Kind() == problem.SessionNotFound:
		return alsoIs(err, session.ErrNotFound)
	case e.Kind() == problem.ContextBudgetTooSmall:
		return alsoIs(err, contextbuild.ErrBudgetTooSmall)
	case e.Kind() == problem.InvalidRequest && e.Status == http.StatusUnprocessableEntity:
		return alsoIs(err, contextbuild.ErrInvalidInput)
	}
	return err
}
