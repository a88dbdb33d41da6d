package compact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/mementohq/memento/tokens"
)

// ExtractiveName is the name of the offline compactor.
const ExtractiveName = "extractive"

// extractiveRules versions the extraction and scoring rules: bump it when
// they change, so older summaries are rebuilt.
const extractiveRules = "rules-v3"

// maxSourceShare bounds the facts of a summary to this share of its
// source's tokens (or minFactTokens, for a short range), beyond the
// carried items (kept whatever they take): a summary as long as what it
// stands for saves nothing in a context.
const (
	maxSourceShare = 0.5
	minFactTokens  = 64
)

// DefaultBudget is the token budget of a summary's text unless configured.
const DefaultBudget = 512

// Extractive is the offline compactor: it keeps the scanner's carried items
// and the sentences that carry facts, chosen by a score under a token
// budget, each with the seq it comes from. It needs no model.
type Extractive struct{}

// Identity is {extractive, rules-v1, "", SchemaVersion}.
func (Extractive) Identity() Identity {
	return Identity{Name: ExtractiveName, PromptVersion: extractiveRules, SchemaVersion: SchemaVersion}
}

var (
	dateRe      = regexp.MustCompile(`(?i)\b(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(/\d{2,4})?|january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|today|tomorrow|tonight|last (week|month|year|night)|next (week|month|year)|\d{4})\b`)
	digitRe     = regexp.MustCompile(`\d`)
	firstPerson = regexp.MustCompile(`(?i)\b(i|i'm|i've|i'd|i'll|my|mine|me|we|we're|we've|our|us)\b`)
)

// candidate is one sentence that may become a fact.
type candidate struct {
	text  string
	seq   int64
	score int
	pos   int
	// sent is the sentence as written (text may prefix its role).
	sent string
}

// scoreSentence rates how much of a fact a sentence carries: numbers and
// dates, named entities (capitalised words past the first), first-person
// statements, and structure (amounts, negations); chit-chat scores low.
func scoreSentence(s string) int {
	words := strings.Fields(s)
	if len(words) < 3 {
		return -1
	}
	score := 0
	if digitRe.MatchString(s) {
		score += 2
	}
	if dateRe.MatchString(s) {
		score += 2
	}
	caps := 0
	for i, w := range words {
		r := []rune(strings.Trim(w, `"'([{`))
		if i > 0 && len(r) > 1 && unicode.IsUpper(r[0]) && strings.ToLower(w) != "i" && !strings.HasPrefix(w, "I'") {
			caps++
		}
	}
	score += min(caps, 3)
	if firstPerson.MatchString(s) {
		score += 2
	}
	if negationRe.MatchString(s) || symbolRe.MatchString(s) || codeAfter.MatchString(s) {
		score++
	}
	if len(words) >= 8 {
		score++
	}
	return score
}

// eventLine renders an event as one line: "step.completed charge (step
// charge, attempt 1): amount=120.5 currency=USD ...", scalar leaves first.
func eventLine(it Item) (line string, prose []string) {
	var b strings.Builder
	b.WriteString(it.Type)
	if it.StepID != "" {
		fmt.Fprintf(&b, " (step %s", it.StepID)
		if it.Attempt > 1 {
			fmt.Fprintf(&b, ", attempt %d", it.Attempt)
		}
		b.WriteString(")")
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(it.Payload))
	d.UseNumber()
	if len(it.Payload) > 0 && d.Decode(&v) == nil {
		var pairs []string
		var leaves func(prefix string, v any)
		leaves = func(prefix string, v any) {
			switch x := v.(type) {
			case map[string]any:
				keys := make([]string, 0, len(x))
				for k := range x {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					p := k
					if prefix != "" {
						p = prefix + "." + k
					}
					leaves(p, x[k])
				}
			case []any:
				for i, e := range x {
					leaves(fmt.Sprintf("%s[%d]", prefix, i), e)
				}
			case string:
				if len(strings.Fields(x)) >= 4 {
					prose = append(prose, splitSentences(x)...)
					return
				}
				pairs = append(pairs, prefix+"="+truncate(x, 80))
			case nil:
			default:
				pairs = append(pairs, fmt.Sprintf("%s=%v", prefix, x))
			}
		}
		leaves("", v)
		if len(pairs) > 16 {
			pairs = append(pairs[:16], "...")
		}
		if len(pairs) > 0 {
			b.WriteString(": ")
			b.WriteString(strings.Join(pairs, " "))
		}
	}
	return b.String(), prose
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// Compact keeps the carried items and the best fact sentences under the
// budget, the facts within maxSourceShare of the source's tokens.
func (x Extractive) Compact(ctx context.Context, in Input) (Draft, error) {
	if err := ctx.Err(); err != nil {
		return Draft{}, err
	}
	counter := in.Counter
	if counter == nil {
		counter = tokens.Approx()
	}
	budget := in.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	col := newCollector()
	source := 0
	var cands []candidate
	var questions []Question
	var decisions []Decision
	for _, it := range in.Items {
		col.scanItem(it)
		var sents []string
		if it.Text != "" {
			sents = splitSentences(it.Text)
			source += counter.Count(it.Text)
		} else {
			line, prose := eventLine(it)
			source += counter.Count(line) + counter.Count(strings.Join(prose, " "))
			// An event is a record of what happened: its line is a fact.
			cands = append(cands, candidate{text: line, seq: it.Seq, score: 4, pos: len(cands)})
			sents = prose
		}
		for _, s := range sents {
			if strings.HasSuffix(s, "?") {
				questions = append(questions, Question{Text: s, SourceSeqs: []int64{it.Seq}})
				continue
			}
			if decisionTextRe.MatchString(s) {
				decisions = append(decisions, Decision{Code: "stated", Text: s, SourceSeqs: []int64{it.Seq}})
			}
			if sc := scoreSentence(s); sc >= 0 {
				text := s
				if it.Text != "" && it.Type != "" {
					text = it.Type + ": " + s
				}
				cands = append(cands, candidate{text: text, seq: it.Seq, score: sc, pos: len(cands), sent: s})
			}
		}
	}
	carried := col.carried()
	decisions = append(col.decisions, decisions...)
	if len(questions) > 10 {
		questions = questions[len(questions)-10:]
	}

	// The text starts with what must never be lost, then the facts that fit.
	var head []string
	head = append(head, fmt.Sprintf("Summary of %s %s, seqs %d-%d (%d entries).", in.Owner.Kind, in.Owner.ID, in.Range.FromSeq, in.Range.ToSeq, len(in.Items)))
	// A sentence is shown once: a negation stated as a decision is in the
	// decision's line (both stay in the structured fields), and a sentence
	// shown in the head is no fact again. Each shown twice, a summary of
	// such sentences was twice as long as its source.
	shown := map[string]bool{}
	for _, d := range decisions {
		shown[d.Text] = true
	}
	head = append(head, carriedLines(carried, shown)...)
	// Decisions of one code share a line, as the carried items do.
	var codes []string
	byCode := map[string][]string{}
	for _, d := range decisions {
		if _, ok := byCode[d.Code]; !ok {
			codes = append(codes, d.Code)
		}
		byCode[d.Code] = append(byCode[d.Code], fmt.Sprintf("%q (seq %s)", d.Text, seqList(d.SourceSeqs)))
	}
	for _, c := range codes {
		head = append(head, fmt.Sprintf("Decisions [%s]: %s.", c, strings.Join(byCode[c], "; ")))
	}
	for _, n := range carried.Negations {
		shown[n.Text] = true
	}
	used := counter.Count(strings.Join(head, "\n"))
	budget = min(budget, used+max(int(float64(source)*maxSourceShare), minFactTokens))
	// Best first; ties go to the later entry (more recent is more relevant).
	order := slices.Clone(cands)
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].score != order[j].score {
			return order[i].score > order[j].score
		}
		return order[i].pos > order[j].pos
	})
	var kept []candidate
	seen := map[string]bool{}
	for _, c := range order {
		if c.score < 1 || seen[c.text] || shown[c.sent] {
			continue
		}
		line := fmt.Sprintf("- (seq %d) %s", c.seq, c.text)
		n := counter.Count(line) + 1
		if used+n > budget {
			continue
		}
		used += n
		seen[c.text] = true
		kept = append(kept, c)
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].pos < kept[j].pos })
	facts := make([]Fact, 0, len(kept))
	lines := slices.Clone(head)
	for _, c := range kept {
		facts = append(facts, Fact{Text: c.text, SourceSeqs: []int64{c.seq}})
		lines = append(lines, fmt.Sprintf("- (seq %d) %s", c.seq, c.text))
	}
	return Draft{Facts: facts, OpenQuestions: questions, Decisions: decisions, Carried: carried, Text: strings.Join(lines, "\n")}, nil
}

func seqList(seqs []int64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ",")
}

// carriedLines renders the carried items for the prose, one line per kind;
// a negation whose sentence is shown elsewhere (skip) is not repeated.
func carriedLines(c Carried, skip map[string]bool) []string {
	var out []string
	join := func(label string, parts []string) {
		if len(parts) > 0 {
			out = append(out, label+": "+strings.Join(parts, "; ")+".")
		}
	}
	var p []string
	for _, o := range c.Operations {
		p = append(p, strings.TrimSpace(fmt.Sprintf("%s %s (seq %s)", o.OperationID, o.Status, seqList(o.SourceSeqs))))
	}
	join("Operations", p)
	p = nil
	for _, a := range c.Approvals {
		p = append(p, strings.TrimSpace(fmt.Sprintf("%s %s (seq %s)", a.ApprovalID, a.Status, seqList(a.SourceSeqs))))
	}
	join("Approvals", p)
	p = nil
	// One amount stated in several entries is one item with their seqs.
	var amounts []Amount
	at := map[[2]string]int{}
	for _, a := range c.Amounts {
		k := [2]string{a.Value, a.Currency}
		if i, ok := at[k]; ok {
			amounts[i].SourceSeqs = append(amounts[i].SourceSeqs, a.SourceSeqs...)
			continue
		}
		at[k] = len(amounts)
		a.SourceSeqs = slices.Clone(a.SourceSeqs)
		amounts = append(amounts, a)
	}
	for _, a := range amounts {
		p = append(p, strings.TrimSpace(fmt.Sprintf("%s %s", a.Value, a.Currency))+fmt.Sprintf(" (seq %s)", seqList(a.SourceSeqs)))
	}
	join("Amounts", p)
	p = nil
	for _, t := range c.PendingToolCalls {
		p = append(p, strings.TrimSpace(fmt.Sprintf("%s %s (seq %s)", t.ToolName, t.CallID, seqList(t.SourceSeqs))))
	}
	join("Pending tool calls", p)
	p = nil
	for _, n := range c.Negations {
		if !skip[n.Text] {
			p = append(p, fmt.Sprintf("%q (seq %s)", n.Text, seqList(n.SourceSeqs)))
		}
	}
	join("Negations", p)
	return out
}
