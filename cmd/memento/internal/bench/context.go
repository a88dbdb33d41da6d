package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/memstore"
)

// The context benchmark puts a whole LoCoMo conversation into a run, one
// event per turn, and builds a context of BudgetTokens for every question
// of categories 1-4. It scores the fraction of the question's evidence
// turns that made it into the context (as a raw event; a summary fact
// naming them would count too), against the most recent turns that fill the
// same budget.

// ContextConfig is one run of the context benchmark.
type ContextConfig struct {
	Conversations []LocomoConversation
	BudgetTokens  int
	Model         string
	// Embedder, when set, ranks older history by meaning too (hybrid).
	Embedder llm.Embedder
	Progress io.Writer
}

// ContextReport is what the benchmark measured.
type ContextReport struct {
	EvidenceInContext float64                     `json:"evidence_in_context"`
	RecentWindow      float64                     `json:"recent_window"`
	FulltextOnly      float64                     `json:"fulltext_only,omitempty"`
	ByCategory        map[string]*ContextCategory `json:"by_category"`
	Questions         int                         `json:"questions"`
	Conversations     int                         `json:"conversations"`
	BudgetTokens      int                         `json:"budget_tokens"`
	Tokenizer         string                      `json:"tokenizer"`
	MeanContextTokens float64                     `json:"mean_context_tokens"`
	Embedder          string                      `json:"embedder,omitempty"`
	MeanBuildMicros   float64                     `json:"mean_build_us"`
}

// ContextCategory is the figures of one question category.
type ContextCategory struct {
	Questions         int     `json:"questions"`
	EvidenceInContext float64 `json:"evidence_in_context"`
	RecentWindow      float64 `json:"recent_window"`
	FulltextOnly      float64 `json:"fulltext_only,omitempty"`
}

// RunContext runs the benchmark.
func RunContext(ctx context.Context, cfg ContextConfig) (*ContextReport, error) {
	if cfg.BudgetTokens <= 0 {
		cfg.BudgetTokens = 2000
	}
	if cfg.Model == "" {
		cfg.Model = "gpt-4o"
	}
	st := memstore.New()
	runs := run.NewService(st, run.Options{})
	hybrid := contextbuild.New(contextbuild.Sources{Runs: runs, Embedder: cfg.Embedder})
	var plain *contextbuild.Builder
	if cfg.Embedder != nil {
		plain = contextbuild.New(contextbuild.Sources{Runs: runs})
	}
	rep := &ContextReport{ByCategory: map[string]*ContextCategory{}, BudgetTokens: cfg.BudgetTokens, Conversations: len(cfg.Conversations)}
	if cfg.Embedder != nil {
		rep.Embedder = cfg.Embedder.Model()
	}
	var sumHybrid, sumRecent, sumPlain, sumTokens float64
	var buildTime time.Duration
	for _, c := range cfg.Conversations {
		runID, bySeq, known, err := ingestContextRun(ctx, runs, c)
		if err != nil {
			return nil, err
		}
		recent, err := hybrid.Build(ctx, "bench", contextbuild.Request{Model: cfg.Model, BudgetTokens: cfg.BudgetTokens, RunID: runID})
		if err != nil {
			return nil, fmt.Errorf("conversation %s: recent window: %w", c.SampleID, err)
		}
		rep.Tokenizer = recent.Accounting.Tokenizer
		inRecent := turnsIn(recent, bySeq)
		n := 0
		for _, qa := range c.QA {
			if !isScored(qa.Category) {
				continue
			}
			evidence := map[string]bool{}
			for _, e := range qa.Evidence {
				ids, _ := NormalizeEvidence(e, known)
				for _, id := range ids {
					evidence[id] = true
				}
			}
			if len(evidence) == 0 {
				continue
			}
			req := contextbuild.Request{Model: cfg.Model, BudgetTokens: cfg.BudgetTokens, RunID: runID, Query: qa.Question}
			t0 := time.Now()
			res, err := hybrid.Build(ctx, "bench", req)
			buildTime += time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("conversation %s: %q: %w", c.SampleID, qa.Question, err)
			}
			h := fraction(turnsIn(res, bySeq), evidence)
			r := fraction(inRecent, evidence)
			p := 0.0
			if plain != nil {
				pres, err := plain.Build(ctx, "bench", req)
				if err != nil {
					return nil, fmt.Errorf("conversation %s: %q: %w", c.SampleID, qa.Question, err)
				}
				p = fraction(turnsIn(pres, bySeq), evidence)
			}
			cat := strconv.Itoa(qa.Category)
			cc := rep.ByCategory[cat]
			if cc == nil {
				cc = &ContextCategory{}
				rep.ByCategory[cat] = cc
			}
			cc.Questions++
			cc.EvidenceInContext += h
			cc.RecentWindow += r
			cc.FulltextOnly += p
			sumHybrid, sumRecent, sumPlain = sumHybrid+h, sumRecent+r, sumPlain+p
			sumTokens += float64(res.Accounting.TotalTokens)
			rep.Questions++
			n++
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench context: %s: %d turns, %d questions\n", c.SampleID, len(bySeq), n)
		}
	}
	if rep.Questions == 0 {
		return nil, fmt.Errorf("bench context: no question of categories 1-4 with evidence")
	}
	q := float64(rep.Questions)
	rep.EvidenceInContext, rep.RecentWindow, rep.FulltextOnly = round4(sumHybrid/q), round4(sumRecent/q), round4(sumPlain/q)
	rep.MeanContextTokens = round4(sumTokens / q)
	rep.MeanBuildMicros = round4(float64(buildTime.Microseconds()) / q)
	for _, cc := range rep.ByCategory {
		n := float64(cc.Questions)
		cc.EvidenceInContext, cc.RecentWindow, cc.FulltextOnly = round4(cc.EvidenceInContext/n), round4(cc.RecentWindow/n), round4(cc.FulltextOnly/n)
	}
	return rep, nil
}

// ingestContextRun commits every turn of c as one event of a new run; it
// returns the run, the dia_id of each seq and the set of turn ids.
func ingestContextRun(ctx context.Context, runs *run.Service, c LocomoConversation) (string, map[int64]string, map[string]bool, error) {
	r, _, err := runs.Create(ctx, "bench", run.CreateRequest{WorkflowName: "locomo", WorkflowVersion: "1", StateSchemaVersion: 1, State: json.RawMessage(`{}`)}, "")
	if err != nil {
		return "", nil, nil, fmt.Errorf("conversation %s: create run: %w", c.SampleID, err)
	}
	l, err := runs.AcquireLease(ctx, "bench", r.RunID, "bench", 0, time.Hour)
	if err != nil {
		return "", nil, nil, fmt.Errorf("conversation %s: lease: %w", c.SampleID, err)
	}
	bySeq, known := map[int64]string{}, map[string]bool{}
	rev := r.StateRevision
	for _, s := range c.Sessions {
		date := ""
		if !s.Date.IsZero() {
			date = s.Date.Format("2 January 2006")
		}
		for _, t := range s.Turns {
			text := strings.TrimSpace(t.Text)
			if cap := strings.TrimSpace(t.Caption); cap != "" {
				text += " [shares a photo: " + cap + "]"
			}
			p, _ := json.Marshal(map[string]string{"speaker": t.Speaker, "text": text, "date": date, "dia_id": t.DiaID})
			got, ev, err := runs.Commit(ctx, "bench", r.RunID, run.CommitRequest{ExpectedRevision: rev, Lease: l, Event: run.EventInput{EventType: "turn", StepID: t.DiaID, Payload: p}, State: json.RawMessage(`{}`), NextStep: "listen"})
			if err != nil {
				return "", nil, nil, fmt.Errorf("conversation %s: commit turn %s: %w", c.SampleID, t.DiaID, err)
			}
			rev = got.StateRevision
			bySeq[ev.Seq] = t.DiaID
			known[t.DiaID] = true
		}
	}
	return r.RunID, bySeq, known, nil
}

// turnsIn is the set of turns whose events are in the context verbatim.
func turnsIn(res contextbuild.Result, bySeq map[int64]string) map[string]bool {
	in := map[string]bool{}
	for _, p := range res.Accounting.Parts {
		if p.Kind != contextbuild.KindHistory && p.Kind != contextbuild.KindRecent {
			continue
		}
		for _, s := range p.SourceIDs {
			if n, err := strconv.ParseInt(strings.TrimPrefix(s, "seq:"), 10, 64); err == nil {
				if id, ok := bySeq[n]; ok {
					in[id] = true
				}
			}
		}
	}
	return in
}

func fraction(in, evidence map[string]bool) float64 {
	found := 0
	for id := range evidence {
		if in[id] {
			found++
		}
	}
	return float64(found) / float64(len(evidence))
}

// ContextCategories lists the categories of a report in order.
func (r *ContextReport) ContextCategories() []string {
	out := make([]string, 0, len(r.ByCategory))
	for k := range r.ByCategory {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
