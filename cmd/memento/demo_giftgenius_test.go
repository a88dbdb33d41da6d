package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mementohq/memento/examples/giftgenius"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/llm/llmtest"
)

// TestDemoGiftGenius: the demo runs both visits offline and succeeds; on a
// data directory it can run again (another user each time).
func TestDemoGiftGenius(t *testing.T) {
	t.Setenv(envModelURL, "")
	t.Setenv(envData, "")
	out, stderr, err := execute(t, context.Background(), "demo", "giftgenius")
	if err != nil {
		t.Fatalf("demo giftgenius: %v\n%s\n%s", err, out, stderr)
	}
	for _, want := range []string{
		"What is Anna into (hobbies, interests)?",
		"-> checkpoint final-choice",
		"[session phone has expired]",
		`restored from checkpoint "final-choice"`,
		"Last time you chose the Trail Coffee Kit",
		"== ok: visit 2 resumed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	visit2 := out[strings.Index(out, "== visit 2"):]
	if q := giftgenius.QuestionsAbout(visit2); len(q) != 0 {
		t.Errorf("visit 2 asked about %v:\n%s", q, visit2)
	}
	data := t.TempDir()
	for i := range 2 {
		if out, _, err := execute(t, context.Background(), "demo", "giftgenius", "--data", data); err != nil || !strings.Contains(out, "== ok") {
			t.Fatalf("run %d on --data: %v\n%s", i+1, err, out)
		}
	}
}

// TestDemoGiftGeniusFailsWhenItAsksAgain: with a model at --model-url that
// follows the planner on the first visit but asks the returning user again
// what the profile says, the demo fails.
func TestDemoGiftGeniusFailsWhenItAsksAgain(t *testing.T) {
	t.Setenv(envData, "")
	t.Setenv(envModelAPIKey, "k")
	srv := llmtest.New(llmtest.Options{APIKey: "k", Answer: func(c llmtest.ChatCall) llmtest.Reply {
		req := llm.ChatRequest{Model: c.Model}
		for _, m := range c.Messages {
			msg := llm.Message{Role: llm.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			}
			req.Messages = append(req.Messages, msg)
		}
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleUser && strings.Contains(last.Content, "Same friend") {
			return llmtest.Reply{Content: "Sure! What is your friend into, and which country should it ship to?"}
		}
		res, err := giftgenius.Planner().Complete(context.Background(), req)
		if err != nil {
			return llmtest.Reply{Content: err.Error()}
		}
		r := llmtest.Reply{Content: res.Content}
		for i, tc := range res.ToolCalls {
			r.ToolCalls = append(r.ToolCalls, llmtest.ToolCall{ID: fmt.Sprintf("call_%d_%d", len(c.Messages), i), Name: tc.Name, Arguments: tc.Arguments})
		}
		return r
	}})
	defer srv.Close()
	out, _, err := execute(t, context.Background(), "demo", "giftgenius", "--model-url", srv.URL, "--chat-model", "gpt-4o-mini")
	if err == nil {
		t.Fatalf("the demo passed with a model that asks again:\n%s", out)
	}
	if !strings.Contains(out, "model gpt-4o-mini") || !strings.Contains(out, "-> checkpoint final-choice") ||
		!strings.Contains(out, "== FAILED: visit 2 asked again about interests, region") {
		t.Fatalf("output:\n%s", out)
	}
}
