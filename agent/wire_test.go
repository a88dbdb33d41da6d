package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/llm/llmtest"
	"github.com/mementohq/memento/llm/openai"
)

// The loop over the OpenAI wire: llm/openai against the fake server, whose
// policy calls a tool, reads its result and answers. The fake refuses a
// conversation that breaks the tool-call protocol, so a 200 on every step
// proves the calls and results went out paired.
func TestOverOpenAIWire(t *testing.T) {
	srv := llmtest.New(llmtest.Options{APIKey: "k", Answer: func(c llmtest.ChatCall) llmtest.Reply {
		last := c.Messages[len(c.Messages)-1]
		switch last.Role {
		case "user":
			return llmtest.Reply{Content: "Let me note that.", ToolCalls: []llmtest.ToolCall{
				{ID: "call_a", Name: "session_patch", Arguments: `{"patch":{"city":"Lyon"}}`},
				{ID: "call_b", Name: "session_get", Arguments: ``},
			}}
		case "tool":
			var got []string
			for _, m := range c.Messages {
				if m.Role == "tool" {
					got = append(got, m.ToolCallID)
				}
			}
			return llmtest.Reply{Content: "Saved for " + strings.Join(got, "+") + "."}
		}
		return llmtest.Reply{Content: "?"}
	}})
	defer srv.Close()
	cl, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := cl.NewChat(openai.ChatConfig{Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	a := newAgent(t, f, chat, func(c *agent.Config) { c.ModelName = "gpt-4o-mini"; c.MaxAnswerTokens = 200 })
	res, err := a.Turn(context.Background(), "I live in Lyon.")
	if err != nil {
		t.Fatalf("turn: %v", err)
	}
	if res.Answer != "Saved for call_a+call_b." || res.Steps != 2 || res.Usage.TotalTokens == 0 {
		t.Fatalf("answer %q, steps %d, usage %+v", res.Answer, res.Steps, res.Usage)
	}
	var st map[string]any
	if json.Unmarshal(res.State, &st) != nil || st["city"] != "Lyon" {
		t.Fatalf("state %s", res.State)
	}
	reqs := srv.Requests(llmtest.Chat)
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests", len(reqs))
	}
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Tools     []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "gpt-4o-mini" || body.MaxTokens != 200 || len(body.Tools) != 3 || body.Tools[0].Type != "function" ||
		body.Tools[1].Function.Name != "session_patch" || strings.Contains(string(body.Tools[1].Function.Parameters), "session_id") {
		t.Fatalf("request %s", reqs[1].Body)
	}
	m := body.Messages
	n := len(m)
	if m[n-3].Role != "assistant" || m[n-3].Content == nil || *m[n-3].Content != "Let me note that." || len(m[n-3].ToolCalls) != 2 ||
		m[n-2].ToolCallID != "call_a" || m[n-1].ToolCallID != "call_b" || !strings.Contains(*m[n-1].Content, `"city":"Lyon"`) {
		t.Fatalf("tool exchange on the wire: %s", reqs[1].Body)
	}
}
