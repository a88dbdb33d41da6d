package compact

import (
	"fmt"

	"github.com/mementohq/memento/tokens"
)

// Reserves are the parts of a model's window a history may not use.
type Reserves struct {
	// System is the system prompt and instructions (never cut).
	System int `json:"system"`
	// Tools is the tool schemas sent with every request.
	Tools int `json:"tools"`
	// Retrieved is room kept for retrieved documents and memories.
	Retrieved int `json:"retrieved"`
	// Answer is the room for the model's answer (max output tokens).
	Answer int `json:"answer"`
}

// Total is the sum of the reserves.
func (r Reserves) Total() int { return r.System + r.Tools + r.Retrieved + r.Answer }

// SeqTokens is the token count of one history entry.
type SeqTokens struct {
	Seq    int64 `json:"seq"`
	Tokens int   `json:"tokens"`
}

// TriggerInput is what Trigger decides on.
type TriggerInput struct {
	// Model names the target model; its counter (tokens.ForModel) is
	// reported in the plan so a caller knows whether counts are exact.
	Model string
	// ContextWindow is the model's window in tokens.
	ContextWindow int
	Reserves      Reserves
	// SummaryTokens is what the summaries already kept for the older part take.
	SummaryTokens int
	// History are the raw entries not yet summarised, oldest first, with
	// their counts (see CountItems).
	History []SeqTokens
	// Keep is the fraction of the history budget the raw entries may fill
	// after a compaction (0: DefaultKeep), so that compaction does not run
	// again at the next entry. A new summary's text must fit in the rest.
	Keep float64
}

// DefaultKeep is the fraction of the history budget left to raw entries
// after a compaction.
const DefaultKeep = 0.5

// Plan is Trigger's answer.
type Plan struct {
	// Compact is true when the history does not fit: Range is then the
	// prefix of History to summarise.
	Compact bool  `json:"compact"`
	Range   Range `json:"range"`
	// Budget is what summaries and raw history may take together:
	// ContextWindow - Reserves.Total().
	Budget int `json:"budget"`
	// HistoryTokens is SummaryTokens plus the sum of History.
	HistoryTokens int `json:"history_tokens"`
	// KeptTokens is the raw history left after compacting Range.
	KeptTokens int    `json:"kept_tokens"`
	Tokenizer  string `json:"tokenizer"`
	Exact      bool   `json:"exact"`
}

// Trigger says whether the history of a target model must be compacted
// and which prefix: nothing while summaries plus raw entries fit in the
// window less the reserves; otherwise the shortest prefix whose removal
// leaves the raw suffix within Keep of the budget (none when the raw
// entries are within it already and the summaries take the room). The
// newest entry is never compacted. A window smaller than the reserves is an error.
func Trigger(in TriggerInput) (Plan, error) {
	c := tokens.ForModel(in.Model)
	p := Plan{Tokenizer: c.Name(), Exact: c.Exact()}
	if in.ContextWindow <= 0 {
		return p, invalid("context window must be positive")
	}
	r := in.Reserves
	if r.System < 0 || r.Tools < 0 || r.Retrieved < 0 || r.Answer < 0 || in.SummaryTokens < 0 {
		return p, invalid("reserves and summary tokens must not be negative")
	}
	p.Budget = in.ContextWindow - r.Total()
	if p.Budget <= 0 {
		return p, invalid("the reserves (%d tokens) leave nothing of a %d-token window", r.Total(), in.ContextWindow)
	}
	keep := in.Keep
	if keep <= 0 || keep >= 1 {
		keep = DefaultKeep
	}
	total := 0
	for i, h := range in.History {
		if h.Tokens < 0 {
			return p, invalid("history[%d] has negative tokens", i)
		}
		if i > 0 && h.Seq <= in.History[i-1].Seq {
			return p, invalid("history seqs must increase (seq %d after %d)", h.Seq, in.History[i-1].Seq)
		}
		total += h.Tokens
	}
	p.HistoryTokens = in.SummaryTokens + total
	p.KeptTokens = total
	if p.HistoryTokens <= p.Budget || len(in.History) < 2 {
		return p, nil
	}
	target := int(float64(p.Budget) * keep)
	kept := total
	cut := 0
	for cut < len(in.History)-1 && kept > target {
		kept -= in.History[cut].Tokens
		cut++
	}
	if cut == 0 {
		// The raw entries already fit in their share: the summaries take
		// the room, and compacting raw entries cannot free it.
		return p, nil
	}
	p.Compact = true
	p.Range = Range{FromSeq: in.History[0].Seq, ToSeq: in.History[cut-1].Seq}
	p.KeptTokens = kept
	return p, nil
}

// CountItems counts each item as the model would see it raw (its type and
// content or payload), with the counter of model.
func CountItems(model string, items []Item) []SeqTokens {
	c := tokens.ForModel(model)
	out := make([]SeqTokens, len(items))
	for i, it := range items {
		text := it.Text
		if text == "" {
			text = string(it.Payload)
		}
		out[i] = SeqTokens{Seq: it.Seq, Tokens: tokens.TokensPerMessage + c.Count(it.Type) + c.Count(text)}
	}
	return out
}

func (p Plan) String() string {
	if !p.Compact {
		return fmt.Sprintf("fits: %d of %d tokens", p.HistoryTokens, p.Budget)
	}
	return fmt.Sprintf("compact %s: %d of %d tokens, %d kept raw", p.Range, p.HistoryTokens, p.Budget, p.KeptTokens)
}
