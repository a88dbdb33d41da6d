package compact

import (
	"errors"
	"fmt"
	"time"
)

// OwnerKind says what log a summary condenses.
type OwnerKind string

// The owners a summary can have.
const (
	OwnerRun     OwnerKind = "run"
	OwnerSession OwnerKind = "session"
)

// Owner names the log a summary covers. A session's messages are bound to
// its user, so a session owner carries UserID (empty for a run); the key of
// an owner is (tenant, Kind, ID).
type Owner struct {
	Kind   OwnerKind `json:"kind"`
	ID     string    `json:"id"`
	UserID string    `json:"user_id,omitempty"`
}

// RunOwner is the owner of a run's events.
func RunOwner(runID string) Owner { return Owner{Kind: OwnerRun, ID: runID} }

// SessionOwner is the owner of a session's messages.
func SessionOwner(sessionID, userID string) Owner {
	return Owner{Kind: OwnerSession, ID: sessionID, UserID: userID}
}

// Range is a contiguous, inclusive range of seqs [FromSeq, ToSeq].
type Range struct {
	FromSeq int64 `json:"from_seq"`
	ToSeq   int64 `json:"to_seq"`
}

// Len is the number of seqs the range covers.
func (r Range) Len() int64 { return r.ToSeq - r.FromSeq + 1 }

// Contains reports whether seq is inside the range.
func (r Range) Contains(seq int64) bool { return seq >= r.FromSeq && seq <= r.ToSeq }

// Overlaps reports whether the two ranges share a seq.
func (r Range) Overlaps(o Range) bool { return r.FromSeq <= o.ToSeq && o.FromSeq <= r.ToSeq }

func (r Range) String() string { return fmt.Sprintf("[%d, %d]", r.FromSeq, r.ToSeq) }

// Identity is who made a summary. A change of any field means the same
// source would be condensed differently, so summaries made by another
// identity are rebuilt (Service.Rebuild, Service.RebuildOwner).
type Identity struct {
	// Name is the compactor's name ("extractive", "llm").
	Name string `json:"name"`
	// PromptVersion versions the prompt (LLM) or the extraction rules (extractive).
	PromptVersion string `json:"prompt_version"`
	// Model is the chat model of an LLM compactor, empty for extractive.
	Model string `json:"model,omitempty"`
	// SchemaVersion versions the summary's structure (SchemaVersion).
	SchemaVersion int `json:"schema_version"`
}

// SchemaVersion is the version of the Summary structure this code writes.
const SchemaVersion = 1

// Status of a summary.
type Status string

// A summary is current until it fails verification (stale) or is rebuilt
// (superseded). Only current summaries that verify are ever used.
const (
	StatusCurrent    Status = "current"
	StatusStale      Status = "stale"
	StatusSuperseded Status = "superseded"
)

// Fact is one statement from the source, with the seqs it comes from.
type Fact struct {
	Text       string  `json:"text"`
	SourceSeqs []int64 `json:"source_seqs"`
}

// Question is an open question raised in the source.
type Question struct {
	Text       string  `json:"text"`
	SourceSeqs []int64 `json:"source_seqs"`
}

// Decision is a decision taken in the source; Code is machine-readable
// (an approval's "approved", a step's outcome, "stated" for one in prose).
type Decision struct {
	Code       string  `json:"code"`
	Text       string  `json:"text"`
	SourceSeqs []int64 `json:"source_seqs"`
}

// ToolCall is a tool call requested in the range with no result in it.
type ToolCall struct {
	CallID     string  `json:"call_id,omitempty"`
	ToolName   string  `json:"tool_name"`
	Arguments  string  `json:"arguments,omitempty"`
	SourceSeqs []int64 `json:"source_seqs"`
}

// Approval is an approval named in the range, with its last known status
// ("pending", "approved", "rejected", ... or "" when only named).
type Approval struct {
	ApprovalID string  `json:"approval_id"`
	Status     string  `json:"status,omitempty"`
	SourceSeqs []int64 `json:"source_seqs"`
}

// Operation is a tool operation id named in the range (see toolop), with
// its last known status.
type Operation struct {
	OperationID string  `json:"operation_id"`
	Status      string  `json:"status,omitempty"`
	SourceSeqs  []int64 `json:"source_seqs"`
}

// Amount is a money amount: Value a decimal string exactly as written
// (thousands separators dropped: "1200.50"), Currency an ISO 4217 code
// ("USD"; a symbol is mapped: $ USD, € EUR, £ GBP, ¥ JPY) or "" when the
// source named none (a payload's {"amount": 1999}), Text the words it was
// found in.
type Amount struct {
	Value      string  `json:"value"`
	Currency   string  `json:"currency"`
	Text       string  `json:"text,omitempty"`
	SourceSeqs []int64 `json:"source_seqs"`
}

// Negation is a sentence that denies or revokes something ("not", "never",
// "don't", "no longer"): dropping it would invert the meaning of the rest.
type Negation struct {
	Cue        string  `json:"cue"`
	Text       string  `json:"text"`
	SourceSeqs []int64 `json:"source_seqs"`
}

// Carried are the items that travel as structure, never only as prose
// (DESIGN.md rule 7). Empty lists are present as [] in JSON.
type Carried struct {
	PendingToolCalls []ToolCall  `json:"pending_tool_calls"`
	Approvals        []Approval  `json:"approvals"`
	Operations       []Operation `json:"operations"`
	Amounts          []Amount    `json:"amounts"`
	Negations        []Negation  `json:"negations"`
}

// Usage is the token accounting of the model call that made a summary.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Summary is one versioned summary of a contiguous range of an owner's log.
//
// Summaries of one owner chain over successive ranges: the first covers
// from seq 1, and each next one starts at Previous's ToSeq+1. A rebuild
// of a range (another compactor identity) is a new summary of the same
// range with Version+1 and Supersedes naming the one it replaces, which
// becomes superseded.
type Summary struct {
	SummaryID string `json:"summary_id"`
	TenantID  string `json:"tenant_id"`
	Owner     Owner  `json:"owner"`
	// Version counts the summaries of this range: 1, then +1 per rebuild.
	Version int   `json:"version"`
	Covers  Range `json:"covers"`
	// SourceDigest is SourceDigest of exactly the items of Covers.
	SourceDigest string   `json:"source_digest"`
	Compactor    Identity `json:"compactor"`
	// ContentDigest seals what the summary says (see ContentDigest).
	ContentDigest string `json:"content_digest"`

	Facts         []Fact     `json:"facts"`
	OpenQuestions []Question `json:"open_questions"`
	Decisions     []Decision `json:"decisions"`
	Carried       Carried    `json:"carried"`
	// Text is the prose of the summary: what a model reads.
	Text string `json:"text"`
	// Tokens is the count of Text by Tokenizer (tokens.ForModel of the
	// service's model); TokensExact is false for an approximation.
	Tokens      int    `json:"tokens"`
	Tokenizer   string `json:"tokenizer"`
	TokensExact bool   `json:"tokens_exact"`
	// Usage is set when a model made the summary.
	Usage *Usage `json:"usage,omitempty"`

	// Previous is the summary of the range just before (empty for the first).
	Previous string `json:"previous,omitempty"`
	// Supersedes is the summary of the same range this one rebuilt.
	Supersedes string `json:"supersedes,omitempty"`

	Status      Status     `json:"status"`
	StaleReason string     `json:"stale_reason,omitempty"`
	StaleAt     *time.Time `json:"stale_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
}

// Draft is what a Compactor produces; the Service adds identity, range,
// digest, tokens and chain.
type Draft struct {
	Facts         []Fact
	OpenQuestions []Question
	Decisions     []Decision
	Carried       Carried
	Text          string
	Usage         *Usage
}

// Sentinel errors callers branch on; the service wraps them with context.
var (
	ErrNotFound         = errors.New("summary not found")
	ErrAlreadyExists    = errors.New("summary already exists")
	ErrInvalidInput     = errors.New("invalid input")
	ErrRange            = errors.New("range is not contiguous with the log or the summary chain")
	ErrUnknownCompactor = errors.New("unknown compactor")
	// ErrCompactorFailed: the compactor could not produce a valid summary
	// (a model that timed out or answered malformed JSON); nothing was stored.
	ErrCompactorFailed = errors.New("compactor failed")
	ErrNoSource        = errors.New("no source configured for this owner kind")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// normalize makes every list non-nil so JSON shows [] and round trips
// through every store compare equal.
func (s *Summary) normalize() {
	if s.Facts == nil {
		s.Facts = []Fact{}
	}
	if s.OpenQuestions == nil {
		s.OpenQuestions = []Question{}
	}
	if s.Decisions == nil {
		s.Decisions = []Decision{}
	}
	s.Carried.normalize()
}

func (c *Carried) normalize() {
	if c.PendingToolCalls == nil {
		c.PendingToolCalls = []ToolCall{}
	}
	if c.Approvals == nil {
		c.Approvals = []Approval{}
	}
	if c.Operations == nil {
		c.Operations = []Operation{}
	}
	if c.Amounts == nil {
		c.Amounts = []Amount{}
	}
	if c.Negations == nil {
		c.Negations = []Negation{}
	}
}

// Normalize returns s with every list non-nil ([] in JSON); stores return
// summaries in this form.
func Normalize(s Summary) Summary { s.normalize(); return s }

// citations calls fn with every source seq the draft cites, naming where.
func (d *Draft) citations(fn func(where string, seqs []int64) error) error {
	for i, f := range d.Facts {
		if err := fn(fmt.Sprintf("facts[%d]", i), f.SourceSeqs); err != nil {
			return err
		}
	}
	for i, q := range d.OpenQuestions {
		if err := fn(fmt.Sprintf("open_questions[%d]", i), q.SourceSeqs); err != nil {
			return err
		}
	}
	for i, x := range d.Decisions {
		if err := fn(fmt.Sprintf("decisions[%d]", i), x.SourceSeqs); err != nil {
			return err
		}
	}
	c := &d.Carried
	for i, x := range c.PendingToolCalls {
		if err := fn(fmt.Sprintf("carried.pending_tool_calls[%d]", i), x.SourceSeqs); err != nil {
			return err
		}
	}
	for i, x := range c.Approvals {
		if err := fn(fmt.Sprintf("carried.approvals[%d]", i), x.SourceSeqs); err != nil {
			return err
		}
	}
	for i, x := range c.Operations {
		if err := fn(fmt.Sprintf("carried.operations[%d]", i), x.SourceSeqs); err != nil {
			return err
		}
	}
	for i, x := range c.Amounts {
		if err := fn(fmt.Sprintf("carried.amounts[%d]", i), x.SourceSeqs); err != nil {
			return err
		}
	}
	for i, x := range c.Negations {
		if err := fn(fmt.Sprintf("carried.negations[%d]", i), x.SourceSeqs); err != nil {
			return err
		}
	}
	return nil
}

// validate checks that every item cites at least one seq, all inside rg,
// and that structured fields are filled; a compactor's draft that fails is
// refused whole (never stored as a half summary).
func (d *Draft) validate(rg Range) error {
	err := d.citations(func(where string, seqs []int64) error {
		if len(seqs) == 0 {
			return fmt.Errorf("%s cites no source seq", where)
		}
		for _, q := range seqs {
			if !rg.Contains(q) {
				return fmt.Errorf("%s cites seq %d outside the range %s", where, q, rg)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, f := range d.Facts {
		if f.Text == "" {
			return fmt.Errorf("facts[%d] has no text", i)
		}
	}
	for i, x := range d.Decisions {
		if x.Code == "" {
			return fmt.Errorf("decisions[%d] has no code", i)
		}
	}
	for i, a := range d.Carried.Amounts {
		if !decimalRe.MatchString(a.Value) {
			return fmt.Errorf("carried.amounts[%d].value %q is not a decimal number", i, a.Value)
		}
		if a.Currency != "" && !currencyRe.MatchString(a.Currency) {
			return fmt.Errorf("carried.amounts[%d].currency %q is not a 3-letter code", i, a.Currency)
		}
	}
	for i, o := range d.Carried.Operations {
		if o.OperationID == "" {
			return fmt.Errorf("carried.operations[%d] has no operation_id", i)
		}
	}
	for i, a := range d.Carried.Approvals {
		if a.ApprovalID == "" {
			return fmt.Errorf("carried.approvals[%d] has no approval_id", i)
		}
	}
	for i, c := range d.Carried.PendingToolCalls {
		if c.ToolName == "" {
			return fmt.Errorf("carried.pending_tool_calls[%d] has no tool_name", i)
		}
	}
	return nil
}
