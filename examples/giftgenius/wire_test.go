package giftgenius_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mementohq/memento/examples/giftgenius"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/llm/llmtest"
	"github.com/mementohq/memento/llm/openai"
)

// TestOverOpenAIWire runs the week-later scenario with the model behind an
// OpenAI-compatible endpoint (llm/openai against the fake server, whose
// answers the Planner decides from the request as it came over the wire):
// the system prompt, the tool schemas and the tool-call protocol are what
// a real model gets, and the fake refuses a conversation that breaks it.
func TestOverOpenAIWire(t *testing.T) {
	srv := llmtest.New(llmtest.Options{APIKey: "k", Answer: func(c llmtest.ChatCall) llmtest.Reply {
		req := llm.ChatRequest{Model: c.Model}
		for _, m := range c.Messages {
			msg := llm.Message{Role: llm.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			}
			req.Messages = append(req.Messages, msg)
		}
		res, err := giftgenius.Planner().Complete(context.Background(), req)
		if err != nil {
			return llmtest.Reply{Content: "planner: " + err.Error()}
		}
		r := llmtest.Reply{Content: res.Content}
		for i, tc := range res.ToolCalls {
			r.ToolCalls = append(r.ToolCalls, llmtest.ToolCall{ID: fmt.Sprintf("call_%d_%d", len(c.Messages), i), Name: tc.Name, Arguments: tc.Arguments})
		}
		return r
	}})
	defer srv.Close()
	cl, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := cl.NewChat(openai.ChatConfig{Model: giftgenius.DefaultModelName})
	if err != nil {
		t.Fatal(err)
	}
	weekLater(t, chat)

	reqs := srv.Requests(llmtest.Chat)
	if len(reqs) < 10 {
		t.Fatalf("%d chat requests", len(reqs))
	}
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != giftgenius.DefaultModelName || len(body.Messages) == 0 || body.Messages[0].Content != giftgenius.System {
		t.Fatalf("first request: model %q, messages %+v", body.Model, body.Messages)
	}
	var names []string
	for _, tl := range body.Tools {
		names = append(names, tl.Function.Name)
		if strings.Contains(string(tl.Function.Parameters), "session_id") || len(tl.Function.Description) < 30 {
			t.Errorf("tool %s as the model sees it: %s %s", tl.Function.Name, tl.Function.Description, tl.Function.Parameters)
		}
	}
	slices.Sort(names)
	want := slices.Clone(giftgenius.ModelTools)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("the model is offered %v, want %v", names, want)
	}
}
