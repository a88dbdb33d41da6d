package compact_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/llm"
)

// FuzzScan: whatever the text and payload, the scanner and the extractive
// compactor do not panic, and their draft passes the service's validation
// (every item cites a seq of the input; amounts are decimal with a code).
func FuzzScan(f *testing.F) {
	f.Add("Refund $1,200.50 and 15 EUR; operation id op-1. I don't want it.", `{"operation_id":"op-2","amount":3,"currency":"usd"}`)
	f.Add("approval id ap-1? never", `{"tool_calls":[{"id":"c","function":{"name":"x","arguments":"{}"}}]}`)
	f.Add("", `{"tool_name":"t","status":"started","call_id":"c1","arguments":{"a":[1,2]}}`)
	f.Add("¥ 5 £3.2 EUR9 9 dollars no longer", `[1,"$4",{"amount_cents":-5,"currency":"eur"}]`)
	f.Fuzz(func(t *testing.T, text, payload string) {
		items := []compact.Item{{Seq: 1, Type: "user", Text: text}, {Seq: 2, Type: "step.completed", Payload: json.RawMessage(payload)}}
		if !json.Valid(items[1].Payload) {
			items[1].Payload = nil
		}
		rg := compact.Range{FromSeq: 1, ToSeq: 2}
		d, err := compact.Extractive{}.Compact(context.Background(), compact.Input{Owner: compact.RunOwner("r"), Range: rg, Items: items, Budget: 200})
		if err != nil {
			t.Fatal(err)
		}
		if err := compact.ValidateDraft(&d, rg); err != nil {
			t.Fatalf("extractive draft invalid: %v", err)
		}
		_ = compact.Scan(items)
	})
}

type stubChat struct{ content string }

func (s stubChat) Complete(context.Context, llm.ChatRequest) (llm.ChatResponse, error) {
	return llm.ChatResponse{Content: s.content, FinishReason: "stop"}, nil
}

// FuzzLLMAnswer: a model's answer is either refused or yields a draft that
// passes validation; never a panic, never half a summary.
func FuzzLLMAnswer(f *testing.F) {
	f.Add(goodAnswer)
	f.Add(`{"facts":[],"open_questions":[],"decisions":[],"carried":{"pending_tool_calls":[],"approvals":[],"operations":[],"amounts":[],"negations":[]},"text":"x"}`)
	f.Add(`{"facts":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, content string) {
		rg := compact.Range{FromSeq: 2, ToSeq: 3}
		items := []compact.Item{{Seq: 2, Type: "user", Text: "pay $5"}, {Seq: 3, Type: "user", Text: "ok"}}
		d, err := compact.LLM{Chat: stubChat{content}, Model: "m"}.Compact(context.Background(), compact.Input{Owner: compact.RunOwner("r"), Range: rg, Items: items})
		if err != nil {
			return
		}
		if err := compact.ValidateDraft(&d, rg); err != nil {
			t.Fatalf("accepted answer is invalid: %v\n%s", err, content)
		}
	})
}
