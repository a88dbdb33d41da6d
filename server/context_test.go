package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/session"
)

// TestContextOverHTTP builds a context from a session, its messages and the
// user's memory, on every memory backend: it fits the budget, names its
// sources, says what it left out, and refuses what it cannot build.
func TestContextOverHTTP(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		e.mustDo(t, "PUT", "/v1/sessions/chat-1", `{"user_id":"u1","state":{"step":"collect_profile","locale":"ru"}}`, e.a)
		var msgs []string
		for i := 0; i < 60; i++ {
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"turn %d: we talked about hiking trails and the weather"}`, []string{"user", "assistant"}[i%2], i))
		}
		msgs[5] = `{"role":"user","content":"my friend Anna hates mugs, never buy her one"}`
		e.mustDo(t, "POST", "/v1/sessions/chat-1/messages?user_id=u1", `{"messages":[`+strings.Join(msgs, ",")+`]}`, e.a)
		e.mustDo(t, "POST", "/v1/memories", `{"subject_id":"u1","key":"preference.language","value":"Russian","provenance":{"source_type":"message","source_id":"chat-1","validated_by":"user_stated"}}`, e.a)

		body := `{"model":"gpt-4o","budget_tokens":400,"reserve_tokens":50,"system":"You are GiftGenius.","query":"what gift for Anna, not a mug?","session_id":"chat-1","user_id":"u1","subject_id":"u1"}`
		res := e.do(t, "POST", "/v1/context", body, e.a)
		if res.status != http.StatusOK {
			t.Fatalf("POST /v1/context: %d %s", res.status, res.body)
		}
		// Through the Go client, a missing session is session.ErrNotFound, as in the library.
		if _, err := e.c.BuildContext(context.Background(), contextbuild.Request{Model: "gpt-4o", BudgetTokens: 100, SessionID: "nope", UserID: "u1"}); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("client context of a missing session: %v, want session.ErrNotFound", err)
		}
		var out struct {
			Messages []struct {
				Role, Content string
			} `json:"messages"`
			Accounting struct {
				BudgetTokens int  `json:"budget_tokens"`
				TotalTokens  int  `json:"total_tokens"`
				Exact        bool `json:"exact"`
				Parts        []struct {
					Kind      string   `json:"kind"`
					Tokens    int      `json:"tokens"`
					SourceIDs []string `json:"source_ids"`
				} `json:"parts"`
				LeftOut []struct {
					Kind   string `json:"kind"`
					Reason string `json:"reason"`
				} `json:"left_out"`
			} `json:"accounting"`
		}
		if err := json.Unmarshal(res.body, &out); err != nil {
			t.Fatal(err)
		}
		acc := out.Accounting
		if !acc.Exact || acc.TotalTokens > 350 || acc.TotalTokens == 0 {
			t.Fatalf("accounting = %+v", acc)
		}
		kinds := map[string][]string{}
		sum := 0
		for _, p := range acc.Parts {
			kinds[p.Kind] = p.SourceIDs
			sum += p.Tokens
		}
		if sum+3 != acc.TotalTokens {
			t.Fatalf("parts add up to %d (+3 priming), total says %d", sum, acc.TotalTokens)
		}
		if out.Messages[0].Content != "You are GiftGenius." || out.Messages[len(out.Messages)-1].Content != "what gift for Anna, not a mug?" {
			t.Fatalf("system or query cut: %+v", out.Messages)
		}
		if !contains(kinds["history"], "msg:6") {
			t.Fatalf("the old message about Anna is not in the context: %+v", acc.Parts)
		}
		if len(kinds["profile"]) != 1 || len(kinds["session_state"]) != 1 || len(acc.LeftOut) == 0 {
			t.Fatalf("parts = %+v, left out = %+v", acc.Parts, acc.LeftOut)
		}
		// Tenant B cannot build from tenant A's session.
		expectProblem(t, e.do(t, "POST", "/v1/context", body, e.b), http.StatusNotFound, problem.SessionNotFound)
		expectProblem(t, e.do(t, "POST", "/v1/context", `{"model":"gpt-4o","budget_tokens":10,"system":"`+strings.Repeat("long system ", 40)+`"}`, e.a),
			http.StatusUnprocessableEntity, problem.ContextBudgetTooSmall)
		expectProblem(t, e.do(t, "POST", "/v1/context", `{"budget_tokens":100}`, e.a), http.StatusUnprocessableEntity, problem.InvalidRequest)
		expectProblem(t, e.do(t, "POST", "/v1/context", `{"model":"gpt-4o","budget_tokens":100,"session_id":"chat-1"}`, e.a), http.StatusUnprocessableEntity, problem.InvalidRequest)
		expectProblem(t, e.do(t, "POST", "/v1/context", `{"model":"gpt-4o","budget_tokens":300,"tools":[{"name":"search","parameters":[1,2]}]}`, e.a), http.StatusUnprocessableEntity, problem.InvalidRequest)

		// The tool contracts reach the model in the chat protocol's names,
		// with nothing the caller did not send.
		res = e.do(t, "POST", "/v1/context", `{"model":"gpt-4o","budget_tokens":300,"tools":[{"name":"search","description":"search things","parameters":{"type":"object"}}]}`, e.a)
		if res.status != http.StatusOK {
			t.Fatalf("context with tools: %d %s", res.status, res.body)
		}
		var withTools struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		_ = json.Unmarshal(res.body, &withTools)
		if len(withTools.Messages) == 0 || !strings.Contains(withTools.Messages[0].Content, `"name":"search"`) ||
			strings.Contains(withTools.Messages[0].Content, "Name") || strings.Contains(withTools.Messages[0].Content, "trict") {
			t.Fatalf("tools part: %s", res.body)
		}
	})
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// mustDo sends a request that must succeed.
func (e *testEnv) mustDo(t testing.TB, method, path, body string, hdr map[string]string) rawResponse {
	t.Helper()
	res := e.do(t, method, path, body, hdr)
	if res.status >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, res.status, res.body)
	}
	return res
}
