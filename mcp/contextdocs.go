package mcp

import (
	"context"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/retrieval"
)

type contextIn struct {
	Query         string `json:"query" jsonschema:"what the next model call is about; ranks history, memories and documents"`
	SessionID     string `json:"session_id,omitempty" jsonschema:"build from this session's state and messages"`
	Run           string `json:"run,omitempty" jsonschema:"or from this run's state and events (not both)"`
	BudgetTokens  int    `json:"budget_tokens" jsonschema:"the most tokens the context may take"`
	ReserveTokens int    `json:"reserve_tokens,omitempty" jsonschema:"tokens kept free for the answer"`
	Model         string `json:"model,omitempty" jsonschema:"the model the context is for; sets the tokenizer (default gpt-4o)"`
	System        string `json:"system,omitempty" jsonschema:"the system prompt, kept whole"`
	MemoryK       int    `json:"memory_k,omitempty" jsonschema:"how many long-term memories to include"`
}

type retrieveIn struct {
	Query string `json:"query" jsonschema:"what to look for in the documents this user may read"`
	K     int    `json:"k,omitempty" jsonschema:"how many passages (default 5, at most 50)"`
}

// snapshotting annotates a tool that reads, and stores what it read as a
// retrieval snapshot (to replay later): not read-only, never destructive,
// and a repeat stores another snapshot.
var snapshotting = &gomcp.ToolAnnotations{DestructiveHint: new(false)}

// DefaultModel sets the tokenizer of a context_build call that names none.
const DefaultModel = "gpt-4o"

// Principal is the retrieval principal of a bound user.
func Principal(user string) string { return "user:" + user }

func (t *toolset) contextTools(srv *gomcp.Server) {
	add(t, srv, &gomcp.Tool{Name: "context_build", Title: "Build a model context",
		Description: "Assemble what the model should see next under a token budget: system prompt, session state, summaries of older history, recent messages, long-term memories and documents, with an accounting of every part's tokens and sources.",
		Annotations: snapshotting},
		func(ctx context.Context, c call, in contextIn) (any, error) {
			if in.SessionID != "" && in.Run != "" {
				return nil, invalid("give session_id or run, not both")
			}
			req := contextbuild.Request{Model: in.Model, BudgetTokens: in.BudgetTokens, ReserveTokens: in.ReserveTokens, System: in.System,
				Query: in.Query, SessionID: in.SessionID, MemoryK: in.MemoryK}
			if req.Model == "" {
				req.Model = DefaultModel
			}
			if in.SessionID != "" {
				req.UserID = c.User
			}
			if in.Run != "" {
				id, err := RunID(c.User, in.Run)
				if err != nil {
					return nil, err
				}
				req.RunID = id
			}
			if t.s.svc.Memory != nil {
				req.SubjectID = c.User
			}
			if t.s.svc.Retrieval != nil {
				req.Principal = Principal(c.User)
			}
			return t.s.svc.Context.Build(ctx, c.Tenant, req)
		})
}

func (t *toolset) retrievalTools(srv *gomcp.Server) {
	add(t, srv, &gomcp.Tool{Name: "documents_retrieve", Title: "Retrieve documents",
		Description: "Search the documents this user may read. Every passage says which document, version and chunk it came from; the result is stored as a snapshot that can be replayed later.",
		Annotations: snapshotting},
		func(ctx context.Context, c call, in retrieveIn) (any, error) {
			switch {
			case in.K < 0 || in.K > 50:
				return nil, invalid("k must be between 1 and 50")
			case in.K == 0:
				in.K = 5
			}
			return t.s.svc.Retrieval.Retrieve(ctx, c.Tenant, retrieval.RetrieveRequest{Query: in.Query, Principal: Principal(c.User), K: in.K})
		})
}
