package contextbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/tokens"
)

// Part kinds, in the order a context lists them.
const (
	KindSystem       = "system"
	KindTools        = "tools"
	KindSessionState = "session_state"
	KindRunState     = "run_state"
	KindProfile      = "profile"
	KindMemories     = "memories"
	KindSummary      = "summary"
	KindDocuments    = "documents"
	KindHistory      = "history"        // older raw events or messages chosen for the query
	KindRecent       = "recent_history" // the newest raw events or messages
	KindQuery        = "query"
)

// Shares of the budget left after the parts that are never cut: each
// optional part may take at most its share; what a part leaves unused goes
// to the history. Fixed on principle (state and facts are small and dense,
// history is what a conversation mostly is), not fitted to any benchmark.
const (
	stateShare    = 0.15
	profileShare  = 0.15
	memoryShare   = 0.20
	summaryShare  = 0.20
	documentShare = 0.25
	// recentShare is the part of the history budget kept for the newest
	// items when a query asks for older ones too.
	recentShare = 0.10
	// minRecent newest items are kept ahead of any older one (continuity),
	// when they fit.
	minRecent = 4
)

// Limits of a request.
const (
	MaxBudgetTokens = 2_000_000
	MaxSystemBytes  = 256 << 10
	// MaxQueryBytes is the bound of the memory and retrieval layers the
	// query goes on to, so a query this layer takes is never refused there.
	MaxQueryBytes  = 4 << 10
	DefaultMemoryK = 20
	MaxMemoryK     = 200
)

// ErrInvalidInput is a malformed request; ErrBudgetTooSmall is a budget the
// parts that are never cut (system, tools, query) do not fit in.
var (
	ErrInvalidInput   = errors.New("invalid input")
	ErrBudgetTooSmall = errors.New("the budget does not hold the system part, the tools and the query")
)

// Request is one context to build.
type Request struct {
	Model         string     `json:"model"`
	BudgetTokens  int        `json:"budget_tokens"`
	ReserveTokens int        `json:"reserve_tokens"`
	System        string     `json:"system"`
	Tools         []llm.Tool `json:"tools"`
	Query         string     `json:"query"`
	SessionID     string     `json:"session_id"`
	UserID        string     `json:"user_id"`
	RunID         string     `json:"run_id"`
	SubjectID     string     `json:"subject_id"`
	Principal     string     `json:"principal"`
	MemoryK       int        `json:"memory_k"`
}

// Result is the built context: the messages and how the budget was spent.
type Result struct {
	Messages   []llm.Message `json:"messages"`
	Accounting Accounting    `json:"accounting"`
}

// Accounting says what every token is and where it came from.
type Accounting struct {
	BudgetTokens  int `json:"budget_tokens"`
	ReserveTokens int `json:"reserve_tokens"`
	TotalTokens   int `json:"total_tokens"`
	// ReplyPrimingTokens prime the model's reply: in TotalTokens, in no
	// part (TotalTokens = the parts' tokens + ReplyPrimingTokens).
	ReplyPrimingTokens int       `json:"reply_priming_tokens"`
	Tokenizer          string    `json:"tokenizer"`
	Exact              bool      `json:"exact"`
	Parts              []Part    `json:"parts"`
	LeftOut            []LeftOut `json:"left_out"`
	// RetrievalSnapshotID names the stored retrieval snapshot the documents
	// came from (GET /v1/retrieval-snapshots/{id} shows every hit), so a run
	// can be reproduced; empty when no documents were retrieved.
	RetrievalSnapshotID string `json:"retrieval_snapshot_id,omitempty"`
}

// Part is one part of the context with its tokens and sources (event seqs
// as "seq:N", message seqs as "msg:N", "memory:ID", "summary:ID",
// "chunk:ID", "session:ID", "run:ID@revision").
type Part struct {
	Kind      string   `json:"kind"`
	Tokens    int      `json:"tokens"`
	SourceIDs []string `json:"source_ids"`
}

// LeftOut is something that could have gone in and did not, and why.
type LeftOut struct {
	Kind      string   `json:"kind"`
	SourceIDs []string `json:"source_ids"`
	Reason    string   `json:"reason"`
}

// Summary is a verified summary of an owner's older history, as the
// builder shows it.
type Summary struct {
	ID      string
	FromSeq int64
	ToSeq   int64
	Text    string
}

// Summaries gives the builder the verified summaries of a run or of a
// user's session (ownerKind "run" or "session"; userID only for sessions).
// A summary that fails verification is not returned. The builder shows the
// contiguous chain that starts with the first one returned; items before
// it and after it stay raw.
type Summaries interface {
	Verified(ctx context.Context, tenantID, ownerKind, ownerID, userID string) ([]Summary, error)
}

// Document is a retrieved chunk the principal may read.
type Document struct {
	ChunkID string
	Text    string
}

// Retrieved is what a Retriever found: the documents, and the id of the
// snapshot that records the retrieval.
type Retrieved struct {
	SnapshotID string
	Documents  []Document
}

// Retriever gives the builder documents for a query and a principal.
type Retriever interface {
	Retrieve(ctx context.Context, tenantID, principal, query string, k int) (Retrieved, error)
}

// Sources are the services a builder reads; any may be nil, and a request
// naming a missing one is ErrInvalidInput.
type Sources struct {
	Runs      *run.Service
	Sessions  *session.Service
	Memory    *memory.Service
	Summaries Summaries
	Retriever Retriever
	// Embedder, when set, ranks older history by meaning as well as words.
	Embedder llm.Embedder
}

// Builder assembles model contexts under a token budget. It caches each
// history's items with their token counts and a search index, so a second
// build over a long history neither re-reads nor re-tokenizes it.
type Builder struct {
	src     Sources
	history *historyCache
}

// New returns a builder over src.
func New(src Sources) *Builder {
	return &Builder{src: src, history: newHistoryCache(256)}
}

// Build assembles the context for r. The result never exceeds
// BudgetTokens-ReserveTokens by the model's tokenizer, keeps the system
// part, the tools and the query whole, and is the same for the same inputs
// and stored data.
func (b *Builder) Build(ctx context.Context, tenantID string, r Request) (Result, error) {
	if err := b.check(r); err != nil {
		return Result{}, err
	}
	counter := tokens.ForModel(r.Model)
	a := &assembly{counter: counter, msgs: []llm.Message{}, acc: Accounting{BudgetTokens: r.BudgetTokens, ReserveTokens: r.ReserveTokens, Tokenizer: counter.Name(), Exact: counter.Exact(), Parts: []Part{}, LeftOut: []LeftOut{}}}
	avail := r.BudgetTokens - r.ReserveTokens - tokens.ReplyPriming

	sys := r.System
	if sys != "" {
		a.add(KindSystem, llm.Message{Role: llm.RoleSystem, Content: sys}, nil)
	}
	if len(r.Tools) > 0 {
		a.add(KindTools, llm.Message{Role: llm.RoleSystem, Content: "Tools:\n" + string(plainJSON(r.Tools))}, nil)
	}
	var queryMsg *llm.Message
	if r.Query != "" {
		queryMsg = &llm.Message{Role: llm.RoleUser, Content: r.Query}
	}
	queryTokens := 0
	if queryMsg != nil {
		queryTokens = tokens.MessageTokens(counter, *queryMsg)
	}
	fixed := a.total + queryTokens
	if fixed > avail {
		// The reply priming is named: with nothing else to keep, "0 tokens,
		// the budget leaves 0" gave no reason a caller could act on.
		return Result{}, fmt.Errorf("%w: they take %d tokens, the budget leaves %d (budget_tokens - reserve_tokens - the %d tokens that prime the reply)", ErrBudgetTooSmall, fixed, max(avail, 0), tokens.ReplyPriming)
	}
	rest := avail - fixed

	own, err := b.readOwner(ctx, tenantID, r)
	if err != nil {
		return Result{}, err
	}
	// The history takes what the optional parts leave, so each of them is
	// capped at its share; but what the history does not need (there is
	// none, or all of it fits) is no reason to leave a part out: a part
	// may then take that too, after the shares of the parts after it.
	historyNeed, wholeFits := rest, false
	if own == nil {
		historyNeed = 0
	} else if n, ok := own.hist.wholeTokens(counter, rest); ok {
		historyNeed, wholeFits = n, true
	}
	shares := []float64{stateShare, profileShare, memoryShare, documentShare}
	// A part the request cannot have keeps no room.
	present := []bool{own != nil, r.SubjectID != "", r.SubjectID != "" && r.Query != "", r.Principal != "" && r.Query != ""}
	budgetOf := func(part int) int {
		later := 0
		for j, sh := range shares[part+1:] {
			if present[part+1+j] {
				later += int(float64(rest) * sh)
			}
		}
		return max(int(float64(rest)*shares[part]), avail-queryTokens-a.total-historyNeed-later)
	}
	if own != nil {
		a.addState(own, budgetOf(0))
	}
	if err := b.addProfile(ctx, a, tenantID, r, budgetOf(1)); err != nil {
		return Result{}, err
	}
	if err := b.addMemories(ctx, a, tenantID, r, budgetOf(2)); err != nil {
		return Result{}, err
	}
	if err := b.addDocuments(ctx, a, tenantID, r, budgetOf(3)); err != nil {
		return Result{}, err
	}
	if own != nil {
		// A summary stands for raw items that do not fit; when they all
		// do, they go in themselves and the summaries stay out.
		var covered span
		if _, fits := own.hist.wholeTokens(counter, avail-a.total-queryTokens); !wholeFits || !fits {
			if covered, err = b.addSummaries(ctx, a, tenantID, own.hist, int(float64(rest)*summaryShare)); err != nil {
				return Result{}, err
			}
		}
		if err := b.addHistory(ctx, a, own.hist, r.Query, avail-a.total-queryTokens, covered); err != nil {
			return Result{}, err
		}
	}
	if queryMsg != nil {
		a.add(KindQuery, *queryMsg, nil)
	}
	// Parts made of lines are counted line by line from cached counts. Each
	// line ends in a newline and starts with a non-space, where the
	// OpenAI encodings' pre-tokenizer always splits, so the sum is the
	// exact count of the joined message (the property test checks it
	// against a full recount) and a rebuild re-tokenizes nothing it has
	// seen. Every part was admitted against what the budget had left, so
	// the total fits by construction; a context over budget is a bug here,
	// answered as one rather than sent.
	a.acc.TotalTokens, a.acc.ReplyPrimingTokens = a.total+tokens.ReplyPriming, tokens.ReplyPriming
	if a.acc.TotalTokens > r.BudgetTokens-r.ReserveTokens {
		return Result{}, fmt.Errorf("build context: %d tokens over a budget of %d (a builder defect)", a.acc.TotalTokens, r.BudgetTokens-r.ReserveTokens)
	}
	return Result{Messages: a.msgs, Accounting: a.acc}, nil
}

func (b *Builder) check(r Request) error {
	switch {
	case r.Model == "" || len(r.Model) > 256:
		return fmt.Errorf("%w: model is required (at most 256 bytes)", ErrInvalidInput)
	case r.BudgetTokens <= 0 || r.BudgetTokens > MaxBudgetTokens:
		return fmt.Errorf("%w: budget_tokens must be within [1, %d]", ErrInvalidInput, MaxBudgetTokens)
	case r.ReserveTokens < 0 || r.ReserveTokens >= r.BudgetTokens:
		return fmt.Errorf("%w: reserve_tokens must be within [0, budget_tokens)", ErrInvalidInput)
	case len(r.System) > MaxSystemBytes || !utf8.ValidString(r.System):
		return fmt.Errorf("%w: system must be UTF-8 of at most %d bytes", ErrInvalidInput, MaxSystemBytes)
	case len(r.Query) > MaxQueryBytes || !utf8.ValidString(r.Query):
		return fmt.Errorf("%w: query must be UTF-8 of at most %d bytes", ErrInvalidInput, MaxQueryBytes)
	case r.SessionID != "" && r.RunID != "":
		return fmt.Errorf("%w: give session_id or run_id, not both", ErrInvalidInput)
	case r.SessionID != "" && r.UserID == "":
		return fmt.Errorf("%w: session_id needs user_id", ErrInvalidInput)
	case r.SessionID != "" && b.src.Sessions == nil, r.RunID != "" && b.src.Runs == nil:
		return fmt.Errorf("%w: this server keeps no sessions or runs to build from", ErrInvalidInput)
	case r.SubjectID != "" && b.src.Memory == nil:
		return fmt.Errorf("%w: this server keeps no long-term memory", ErrInvalidInput)
	case r.Principal != "" && b.src.Retriever == nil:
		return fmt.Errorf("%w: this server keeps no documents to retrieve", ErrInvalidInput)
	case r.MemoryK < 0 || r.MemoryK > MaxMemoryK:
		return fmt.Errorf("%w: memory_k must be within [0, %d]", ErrInvalidInput, MaxMemoryK)
	}
	for _, id := range []string{r.SessionID, r.UserID, r.RunID, r.SubjectID, r.Principal} {
		if len(id) > 256 || !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
			return fmt.Errorf("%w: ids must be UTF-8 without NUL, at most 256 bytes", ErrInvalidInput)
		}
	}
	return nil
}

func (b *Builder) addProfile(ctx context.Context, a *assembly, tenantID string, r Request, cap int) error {
	if r.SubjectID == "" {
		return nil
	}
	p, err := b.src.Memory.Profile(ctx, tenantID, r.SubjectID)
	if err != nil {
		return fmt.Errorf("profile of subject %s: %w", r.SubjectID, err)
	}
	lines := []line{}
	for _, ns := range p.Namespaces {
		for _, it := range ns.Items {
			lines = append(lines, line{text: "- " + ns.Namespace + "/" + it.Key + ": " + renderJSON(it.Value), src: "memory:" + it.MemoryID})
		}
	}
	a.addLines(KindProfile, "Known about the user (confirmed facts):", lines, cap, "over the profile's share of the budget")
	return nil
}

func (b *Builder) addMemories(ctx context.Context, a *assembly, tenantID string, r Request, cap int) error {
	if r.SubjectID == "" || r.Query == "" {
		return nil
	}
	k := r.MemoryK
	if k == 0 {
		k = DefaultMemoryK
	}
	res, err := b.src.Memory.Search(ctx, tenantID, memory.SearchQuery{Query: r.Query, SubjectID: r.SubjectID, K: k})
	if err != nil {
		return fmt.Errorf("search memories of subject %s: %w", r.SubjectID, err)
	}
	inProfile := map[string]bool{}
	for _, p := range a.acc.Parts {
		if p.Kind == KindProfile {
			for _, id := range p.SourceIDs {
				inProfile[id] = true
			}
		}
	}
	lines := []line{}
	for _, h := range res.Items {
		src := "memory:" + h.MemoryID
		if inProfile[src] {
			continue // already in front of the model
		}
		lines = append(lines, line{text: "- " + h.Text, src: src})
	}
	a.addLines(KindMemories, "Relevant memories:", lines, cap, "over the memories' share of the budget")
	return nil
}

func (b *Builder) addDocuments(ctx context.Context, a *assembly, tenantID string, r Request, cap int) error {
	if r.Principal == "" {
		return nil
	}
	if r.Query == "" {
		// Documents are retrieved by the query: none was given to look for.
		a.leave(KindDocuments, []string{r.Principal}, "no query to retrieve documents by")
		return nil
	}
	got, err := b.src.Retriever.Retrieve(ctx, tenantID, r.Principal, r.Query, 20)
	if err != nil {
		return fmt.Errorf("retrieve documents: %w", err)
	}
	a.acc.RetrievalSnapshotID = got.SnapshotID
	lines := make([]line, 0, len(got.Documents))
	for _, d := range got.Documents {
		lines = append(lines, line{text: "[" + d.ChunkID + "] " + d.Text, src: "chunk:" + d.ChunkID})
	}
	a.addLines(KindDocuments, "Retrieved documents:", lines, cap, "over the documents' share of the budget")
	return nil
}

// addSummaries shows the verified summaries of the history's older part,
// newest first while they fit; it returns the last seq they cover
// contiguously from the start (0 when none).
func (b *Builder) addSummaries(ctx context.Context, a *assembly, tenantID string, h *history, cap int) (span, error) {
	if b.src.Summaries == nil {
		return span{}, nil
	}
	sums, err := b.src.Summaries.Verified(ctx, tenantID, h.kind, h.id, h.userID)
	if err != nil {
		return span{}, fmt.Errorf("read summaries: %w", err)
	}
	if len(sums) == 0 {
		return span{}, nil
	}
	sort.Slice(sums, func(i, j int) bool { return sums[i].FromSeq < sums[j].FromSeq })
	// The chain: contiguous from the first summary (which starts after the
	// log's first items when a session's cap trimmed the ones it began with).
	n := 1
	for n < len(sums) && sums[n].FromSeq == sums[n-1].ToSeq+1 {
		n++
	}
	lines := make([]line, 0, n)
	for _, s := range sums[:n] {
		lines = append(lines, line{text: fmt.Sprintf("[%s %d-%d] %s", seqLabel(h.kind), s.FromSeq, s.ToSeq, s.Text), src: "summary:" + s.ID})
	}
	// Only the part of the chain that is shown counts as covered.
	if used := a.addLines(KindSummary, "Summary of the earlier history:", lines, cap, "over the summaries' share of the budget"); used > 0 {
		return span{from: sums[0].FromSeq, to: sums[used-1].ToSeq}, nil
	}
	return span{}, nil
}

// span is the range of seqs the shown summaries cover (zero: none).
type span struct{ from, to int64 }

func (c span) holds(seq int64) bool { return c.to > 0 && seq >= c.from && seq <= c.to }

func seqLabel(kind string) string {
	if kind == ownerSession {
		return "messages"
	}
	return "events"
}

// compactJSON is b on one line with its members sorted, as the model is
// shown it: numbers keep their literal (through float64, an id past 2^53
// lost its last digits) and <, > and & stay themselves (json.Marshal's
// \u003c escapes are text to a model, and cost tokens).
func compactJSON(b json.RawMessage) []byte {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return b
	}
	return plainJSON(v)
}

// plainJSON encodes v without HTML escapes and without the trailing newline.
func plainJSON(v any) []byte {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func renderJSON(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(compactJSON(v))
}
