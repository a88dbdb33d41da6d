package compact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mementohq/memento/llm"
)

// LLMName is the name of the model-backed compactor.
const LLMName = "llm"

// llmPromptVersion versions the prompt and answer schema below: bump it
// when either changes, so older summaries are rebuilt.
const llmPromptVersion = "prompt-v1"

// LLM compacts through a chat model that answers JSON matching
// llmAnswerSchema (OpenAI structured outputs). The answer is validated
// whole: unknown members, missing members, citations outside the range or
// a truncated answer are an error (ErrCompactorFailed), never a partial
// summary. The carried items are the deterministic scanner's (Scan) merged
// with the model's, so what the model leaves out still travels.
type LLM struct {
	Chat llm.Chat
	// Model is the model name sent and recorded in the identity.
	Model string
	// MaxTokens caps the answer (0: twice the text budget plus 512).
	MaxTokens int
}

// Identity is {llm, prompt-v1, Model, SchemaVersion}.
func (c LLM) Identity() Identity {
	return Identity{Name: LLMName, PromptVersion: llmPromptVersion, Model: c.Model, SchemaVersion: SchemaVersion}
}

const llmSystemPrompt = `You compact part of an AI agent's history into a summary that another model will read instead of the raw entries.
Each entry is given as [seq] type (step): content. Answer only JSON matching the schema.
- facts: short, self-contained statements of what happened or was said, each citing the seqs it comes from.
- open_questions: questions raised and not answered in these entries.
- decisions: decisions taken, with a short machine-readable code (e.g. "refund.approved").
- carried: every pending tool call (requested, no result yet), approval id, operation id, money amount (value as a decimal string, ISO 4217 currency) and negation ("not", "never", "don't", "no longer") - as fields, exactly as written.
- text: the summary as prose, under the token budget.
Cite only seqs of the entries given. Never invent ids or amounts.`

// llmAnswerSchema is the JSON Schema of the answer (strict: every member
// required, no others).
var llmAnswerSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["facts", "open_questions", "decisions", "carried", "text"],
  "properties": {
    "facts": {"type": "array", "items": {"$ref": "#/$defs/cited"}},
    "open_questions": {"type": "array", "items": {"$ref": "#/$defs/cited"}},
    "decisions": {"type": "array", "items": {"type": "object", "additionalProperties": false,
      "required": ["code", "text", "source_seqs"],
      "properties": {"code": {"type": "string"}, "text": {"type": "string"}, "source_seqs": {"$ref": "#/$defs/seqs"}}}},
    "carried": {"type": "object", "additionalProperties": false,
      "required": ["pending_tool_calls", "approvals", "operations", "amounts", "negations"],
      "properties": {
        "pending_tool_calls": {"type": "array", "items": {"type": "object", "additionalProperties": false,
          "required": ["call_id", "tool_name", "arguments", "source_seqs"],
          "properties": {"call_id": {"type": "string"}, "tool_name": {"type": "string"}, "arguments": {"type": "string"}, "source_seqs": {"$ref": "#/$defs/seqs"}}}},
        "approvals": {"type": "array", "items": {"type": "object", "additionalProperties": false,
          "required": ["approval_id", "status", "source_seqs"],
          "properties": {"approval_id": {"type": "string"}, "status": {"type": "string"}, "source_seqs": {"$ref": "#/$defs/seqs"}}}},
        "operations": {"type": "array", "items": {"type": "object", "additionalProperties": false,
          "required": ["operation_id", "status", "source_seqs"],
          "properties": {"operation_id": {"type": "string"}, "status": {"type": "string"}, "source_seqs": {"$ref": "#/$defs/seqs"}}}},
        "amounts": {"type": "array", "items": {"type": "object", "additionalProperties": false,
          "required": ["value", "currency", "text", "source_seqs"],
          "properties": {"value": {"type": "string"}, "currency": {"type": "string"}, "text": {"type": "string"}, "source_seqs": {"$ref": "#/$defs/seqs"}}}},
        "negations": {"type": "array", "items": {"type": "object", "additionalProperties": false,
          "required": ["cue", "text", "source_seqs"],
          "properties": {"cue": {"type": "string"}, "text": {"type": "string"}, "source_seqs": {"$ref": "#/$defs/seqs"}}}}
      }},
    "text": {"type": "string"}
  },
  "$defs": {
    "seqs": {"type": "array", "items": {"type": "integer"}},
    "cited": {"type": "object", "additionalProperties": false, "required": ["text", "source_seqs"],
      "properties": {"text": {"type": "string"}, "source_seqs": {"$ref": "#/$defs/seqs"}}}
  }
}`)

// AnswerSchema returns the JSON Schema the LLM compactor asks for.
func AnswerSchema() json.RawMessage { return append(json.RawMessage(nil), llmAnswerSchema...) }

// llmAnswer mirrors llmAnswerSchema; pointers tell a missing member from an empty one.
type llmAnswer struct {
	Facts         *[]Fact     `json:"facts"`
	OpenQuestions *[]Question `json:"open_questions"`
	Decisions     *[]Decision `json:"decisions"`
	Carried       *Carried    `json:"carried"`
	Text          *string     `json:"text"`
}

// renderItems writes the entries for the prompt.
func renderItems(items []Item) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "[%d] %s", it.Seq, it.Type)
		if it.StepID != "" {
			fmt.Fprintf(&b, " (%s)", it.StepID)
		}
		b.WriteString(": ")
		if it.Text != "" {
			b.WriteString(it.Text)
		} else {
			b.Write(it.Payload)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Compact asks the model once (the client bounds and retries the call).
func (c LLM) Compact(ctx context.Context, in Input) (Draft, error) {
	if c.Chat == nil {
		return Draft{}, errors.New("llm compactor has no chat model")
	}
	budget := in.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	maxTokens := c.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 2*budget + 512
	}
	user := fmt.Sprintf("Owner: %s %s. Entries %d to %d. Token budget of text: %d.\n", in.Owner.Kind, in.Owner.ID, in.Range.FromSeq, in.Range.ToSeq, budget)
	if in.Previous != nil {
		user += "Summary of the entries before (context only, do not repeat):\n" + in.Previous.Text + "\n"
	}
	user += "Entries:\n" + renderItems(in.Items)
	resp, err := c.Chat.Complete(ctx, llm.ChatRequest{
		Model:          c.Model,
		Messages:       []llm.Message{{Role: llm.RoleSystem, Content: llmSystemPrompt}, {Role: llm.RoleUser, Content: user}},
		ResponseFormat: &llm.ResponseFormat{Name: "summary", Schema: llmAnswerSchema, Strict: true},
		Temperature:    llm.Float64(0),
		MaxTokens:      maxTokens,
	})
	if err != nil {
		return Draft{}, fmt.Errorf("chat: %w", err)
	}
	if resp.FinishReason != "" && resp.FinishReason != "stop" {
		return Draft{}, fmt.Errorf("the model stopped with %q: the answer is incomplete", resp.FinishReason)
	}
	var a llmAnswer
	dec := json.NewDecoder(bytes.NewReader([]byte(strings.TrimSpace(resp.Content))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Draft{}, fmt.Errorf("the answer is not the summary JSON: %w", err)
	}
	if dec.More() {
		return Draft{}, errors.New("the answer has data after the summary JSON")
	}
	if a.Facts == nil || a.OpenQuestions == nil || a.Decisions == nil || a.Carried == nil || a.Text == nil {
		return Draft{}, errors.New("the answer lacks a required member (facts, open_questions, decisions, carried, text)")
	}
	d := Draft{Facts: *a.Facts, OpenQuestions: *a.OpenQuestions, Decisions: *a.Decisions, Carried: *a.Carried, Text: *a.Text,
		Usage: &Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, TotalTokens: resp.Usage.TotalTokens}}
	if strings.TrimSpace(d.Text) == "" {
		return Draft{}, errors.New("the answer's text is empty")
	}
	d.Carried.normalize()
	// Validate the model's own answer before merging, so a bad citation is
	// the model's error and not hidden by the scanner's items.
	if err := d.validate(in.Range); err != nil {
		return Draft{}, fmt.Errorf("the answer is invalid: %w", err)
	}
	d.Carried = mergeCarried(Scan(in.Items), d.Carried)
	return d, nil
}

// mergeCarried is a's items plus those of b that a does not have (by id,
// or by value and currency and seqs for amounts, by text for negations).
func mergeCarried(a, b Carried) Carried {
	out := a
	has := func(n int, same func(i int) bool) bool {
		for i := range n {
			if same(i) {
				return true
			}
		}
		return false
	}
	for _, x := range b.Operations {
		if !has(len(out.Operations), func(i int) bool { return out.Operations[i].OperationID == x.OperationID }) {
			out.Operations = append(out.Operations, x)
		}
	}
	for _, x := range b.Approvals {
		if !has(len(out.Approvals), func(i int) bool { return out.Approvals[i].ApprovalID == x.ApprovalID }) {
			out.Approvals = append(out.Approvals, x)
		}
	}
	for _, x := range b.PendingToolCalls {
		if !has(len(out.PendingToolCalls), func(i int) bool {
			return out.PendingToolCalls[i].ToolName == x.ToolName && out.PendingToolCalls[i].CallID == x.CallID
		}) {
			out.PendingToolCalls = append(out.PendingToolCalls, x)
		}
	}
	for _, x := range b.Amounts {
		if !has(len(out.Amounts), func(i int) bool {
			return out.Amounts[i].Value == x.Value && out.Amounts[i].Currency == x.Currency
		}) {
			out.Amounts = append(out.Amounts, x)
		}
	}
	for _, x := range b.Negations {
		if !has(len(out.Negations), func(i int) bool { return out.Negations[i].Text == x.Text }) {
			out.Negations = append(out.Negations, x)
		}
	}
	out.normalize()
	return out
}
