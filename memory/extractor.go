package memory

import (
	"context"
	"encoding/json"
	"time"
)

// Extractor turns messages into candidate claims. It states facts only as
// candidates: the Service's policy decides what is kept.
type Extractor interface {
	Name() string // identity and version, recorded in provenance ("rules@1", "llm:gpt-4o-mini@1")
	Extract(ctx context.Context, msgs []Message) (Extraction, error)
}
type Message struct {
	ID, Role, Content string
	At                time.Time
}
type Candidate struct {
	Namespace   string          `json:"namespace,omitempty"` // "" = the request's namespace
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value"`
	Text        string          `json:"text,omitempty"`
	Category    string          `json:"category,omitempty"`
	Kind        string          `json:"kind"`
	ValidatedBy string          `json:"validated_by"`
	Confidence  float64         `json:"confidence"`
	MessageIDs  []string        `json:"message_ids"`
	Evidence    string          `json:"evidence,omitempty"`
}
type Extraction struct {
	Candidates []Candidate
	Skipped    []SkippedMessage
	Usage      Usage
}
type SkippedMessage struct{ MessageID, Reason string }
type Usage struct{ PromptTokens, CompletionTokens, Calls int }

// SensitiveCategory reports categories held for explicit confirmation.
func SensitiveCategory(c string) bool {
	switch c {
	case "health", "medical", "religion", "politics", "sexuality", "ethnicity", "biometric", "criminal", "union", "genetic":
		return true
	}
	return false
}

// TransientCategory reports categories never kept long term.
func TransientCategory(c string) bool {
	switch c {
	case "mood", "emotion", "feeling":
		return true
	}
	return false
}
