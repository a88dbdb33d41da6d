package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/problem"
)

var contextSentinels = []sentinel{
	{contextbuild.ErrBudgetTooSmall, problem.ContextBudgetTooSmall, 0},
	{contextbuild.ErrInvalidInput, problem.InvalidRequest, http.StatusUnprocessableEntity},
}

// Working memory: one route builds a model context. Registered on every
// server; without a builder (Options.Context nil) it answers 404.
func (s *Server) contextRoutes() []Route {
	return []Route{
		// Building reads and changes nothing: a reader may build.
		{Method: http.MethodPost, Path: "/v1/context", Role: RoleReader, Handler: s.buildContext},
	}
}

// ContextTool is a tool contract the model will be given: counted whole.
type ContextTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ContextRequest is POST /v1/context.
type ContextRequest struct {
	Model         string        `json:"model"`
	BudgetTokens  int           `json:"budget_tokens"`
	ReserveTokens int           `json:"reserve_tokens"`
	System        string        `json:"system"`
	Tools         []ContextTool `json:"tools"`
	Query         string        `json:"query"`
	SessionID     string        `json:"session_id"`
	UserID        string        `json:"user_id"`
	RunID         string        `json:"run_id"`
	SubjectID     string        `json:"subject_id"`
	Principal     string        `json:"principal"`
	MemoryK       int           `json:"memory_k"`
}

// ContextMessage is one message of a built context.
type ContextMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ContextResponse is the built context and its accounting.
type ContextResponse struct {
	Messages   []ContextMessage        `json:"messages"`
	Accounting contextbuild.Accounting `json:"accounting"`
}

func (s *Server) buildContext(w http.ResponseWriter, r *http.Request) error {
	if s.context == nil {
		return newError(problem.NotFound, "the context builder is not configured on this server")
	}
	var req ContextRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Tools) > 128 {
		return unprocessable("at most 128 tools")
	}
	tools := make([]llm.Tool, len(req.Tools))
	for i, t := range req.Tools {
		if t.Name == "" {
			return unprocessable("tools[%d].name is required", i)
		}
		if p := bytes.TrimSpace(t.Parameters); len(p) > 0 && p[0] != '{' {
			return unprocessable("tools[%d].parameters must be a JSON Schema object", i)
		}
		tools[i] = llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	res, err := s.context.Build(r.Context(), tenant(r), contextbuild.Request{
		Model: req.Model, BudgetTokens: req.BudgetTokens, ReserveTokens: req.ReserveTokens, System: req.System, Tools: tools,
		Query: req.Query, SessionID: req.SessionID, UserID: req.UserID, RunID: req.RunID, SubjectID: req.SubjectID,
		Principal: req.Principal, MemoryK: req.MemoryK,
	})
	if err != nil {
		return err
	}
	out := ContextResponse{Messages: make([]ContextMessage, len(res.Messages)), Accounting: res.Accounting}
	for i, m := range res.Messages {
		out.Messages[i] = ContextMessage{Role: string(m.Role), Content: m.Content}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
