package memory

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Extractor turns messages into candidate claims. It states facts only as
// candidates: the Service's policy decides what is kept.
//
// Message IDs must be non-empty and unique within one call (the Service
// fills missing ones before it calls); an extractor refuses other input with
// ErrInvalidInput, because a candidate must name the messages it came from.
type Extractor interface {
	Name() string // identity and version, recorded in provenance ("rules@1", "llm:gpt-4o-mini@1")
	Extract(ctx context.Context, msgs []Message) (Extraction, error)
}

// Message is one chat message given to an extractor.
type Message struct {
	ID, Role, Content string
	At                time.Time
}

// Candidate kinds.
const (
	KindStatement  = "statement"  // the speaker states a fact
	KindCorrection = "correction" // the speaker corrects or retracts an earlier fact (same key)
	KindInference  = "inference"  // the extractor concluded it; never kept long term
)

// Candidate is one claim an extractor proposes.
type Candidate struct {
	Namespace string          `json:"namespace,omitempty"` // "" = the request's namespace
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Text      string          `json:"text,omitempty"`
	Category  string          `json:"category,omitempty"` // preference, name, place, dislike, like, language, relationship, occupation, health, religion, politics, sexuality, ethnicity, mood, ...
	Kind      string          `json:"kind"`               // "statement", "correction", "inference"
	// ValidatedBy is ValidatedUserStated for what the user said explicitly,
	// ValidatedToolConfirmed for what a tool returned, ValidatedModelInferred
	// for a guess.
	ValidatedBy string   `json:"validated_by"`
	Confidence  float64  `json:"confidence"`
	MessageIDs  []string `json:"message_ids"`
	Evidence    string   `json:"evidence,omitempty"` // the span it came from

	// Retracts, on a correction whose Value is JSON null, is the value the
	// speaker said no longer holds ("I don't live in Paris anymore": key
	// home.city, value null, retracts "Paris"). A null Value means "no
	// current value": the Service supersedes the current claim with it (or
	// invalidates the current claim when its value matches Retracts) and
	// never reads it as a fact.
	Retracts json.RawMessage `json:"retracts,omitempty"`
	// Contradicts lists other keys (same namespace) this candidate makes
	// false: "likes.mugs" contradicts "dislikes.mugs".
	Contradicts []string `json:"contradicts,omitempty"`
	// ValidFromHint is the speaker's words for when the fact became true
	// ("since May", "in 2021"); ValidFrom is that hint resolved against the
	// message time, when it could be.
	ValidFromHint string     `json:"valid_from_hint,omitempty"`
	ValidFrom     *time.Time `json:"valid_from,omitempty"`
	// About names the person a claim is about when it is not the speaker
	// ("friend", "wife Anna"); its key is scoped by it ("friend.dislikes.mugs").
	About string `json:"about,omitempty"`
}

// Extraction is what one Extract call found.
type Extraction struct {
	Candidates []Candidate
	// Skipped says, per message that yielded nothing, why (so no input is dropped silently).
	Skipped []SkippedMessage
	// Rejected are candidates the extractor itself threw out (a model's
	// answer naming an unknown message, a missing key, ...), with why.
	Rejected []RejectedCandidate
	Usage    Usage
}

// SkippedMessage is a message that yielded no candidate, and why.
type SkippedMessage struct{ MessageID, Reason string }

// RejectedCandidate is a proposed candidate the extractor refused, and why.
type RejectedCandidate struct {
	Candidate Candidate
	Reason    string
}

// Usage is what an extraction cost a model (zero for offline extractors).
type Usage struct{ PromptTokens, CompletionTokens, Calls int }

// Categories the policy treats specially; the lists follow the special
// categories of personal data (GDPR art. 9 and 10) plus what is fleeting.
var (
	sensitiveCategories = map[string]bool{
		"health": true, "medical": true, "religion": true, "belief": true,
		"politics": true, "political": true, "sexuality": true, "sex_life": true,
		"sexual_orientation": true, "gender_identity": true, "ethnicity": true, "race": true,
		"biometric": true, "genetic": true, "criminal": true, "trade_union": true,
		"disability": true,
	}
	transientCategories = map[string]bool{
		"mood": true, "emotion": true, "feeling": true, "state_of_mind": true,
	}
)

// categoryRoot is c lowercased up to its first '.' or '/' ("health.allergy" -> "health").
func categoryRoot(c string) string {
	c = strings.ToLower(strings.TrimSpace(c))
	if i := strings.IndexAny(c, "./"); i >= 0 {
		c = c[:i]
	}
	return c
}

// SensitiveCategory reports categories held for explicit confirmation (health, religion, politics, sexuality, ethnicity, biometric, criminal, ...).
func SensitiveCategory(c string) bool { return sensitiveCategories[categoryRoot(c)] }

// TransientCategory reports categories never kept long term (mood, emotion, ...).
func TransientCategory(c string) bool { return transientCategories[categoryRoot(c)] }
