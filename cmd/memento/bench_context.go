package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/llm/glove"
	"github.com/mementohq/memento/llm/hashembed"
)

type benchContextFlags struct {
	data     string
	budget   int
	model    string
	embedder string
	asJSON   bool
	quiet    bool
}

func newBenchContextCmd() *cobra.Command {
	var f benchContextFlags
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Evidence that makes it into a built context on a LoCoMo file, against the recent window",
		Long: `Put each conversation of a file in the LoCoMo layout into a run, one event per
turn ({speaker, text, date}), then build a context of --budget tokens for
every question of categories 1-4 with the context builder, and report the
fraction of the question's evidence turns that made it into the context,
per category, against the baseline of the most recent turns that fill the
same budget. With an embedder, the figure for full text only is reported
too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchContext(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "", "a JSON file in the LoCoMo layout (required)")
	fl.IntVar(&f.budget, "budget", 2000, "context budget in tokens")
	fl.StringVar(&f.model, "model", "gpt-4o", "model whose tokenizer counts the budget")
	fl.StringVar(&f.embedder, "embedder", "none", "embedder for the history's meaning: hash (offline hashing), glove[:FILE] (after memento models install glove) or none (full text only)")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as one JSON object")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}

func runBenchContext(cmd *cobra.Command, f benchContextFlags) error {
	if f.data == "" {
		return errors.New("bench context: --data FILE is required")
	}
	fh, err := os.Open(f.data)
	if err != nil {
		return fmt.Errorf("bench context: %w", err)
	}
	convs, err := bench.ReadLocomo(fh)
	_ = fh.Close()
	if err != nil {
		return fmt.Errorf("bench context: %w", err)
	}
	var emb llm.Embedder
	switch name, arg, _ := strings.Cut(f.embedder, ":"); name {
	case "hash":
		emb = hashembed.New(0)
	case "glove":
		path := arg
		if path == "" {
			dir, err := glove.DefaultDir()
			if err != nil {
				return fmt.Errorf("bench context: %w", err)
			}
			path = glove.Path(dir)
		}
		g, err := glove.Load(path)
		if err != nil {
			return fmt.Errorf("bench context: %w (install it with `memento models install glove`)", err)
		}
		emb = g
	case "none":
	default:
		return fmt.Errorf("bench context: unknown embedder %q (hash, glove[:FILE] or none)", f.embedder)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := bench.ContextConfig{Conversations: convs, BudgetTokens: f.budget, Model: f.model, Embedder: emb, Progress: cmd.ErrOrStderr()}
	if f.quiet {
		cfg.Progress = nil
	}
	rep, err := bench.RunContext(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench context: %w", err)
	}
	if f.asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "context of %d tokens (%s), %d questions in %d conversations, mean %.0f tokens, mean build %.0f µs\n",
		rep.BudgetTokens, rep.Tokenizer, rep.Questions, rep.Conversations, rep.MeanContextTokens, rep.MeanBuildMicros)
	// Without an embedder the builder is full text only: no second column.
	plain := func(v float64) string {
		if cfg.Embedder == nil {
			return "(same)"
		}
		return fmt.Sprintf("%.3f", v)
	}
	fmt.Fprintln(w, "category\tquestions\tbuilder\tfull text only\trecent window")
	for _, c := range rep.ContextCategories() {
		cc := rep.ByCategory[c]
		fmt.Fprintf(w, "%s\t%d\t%.3f\t%s\t%.3f\n", c, cc.Questions, cc.EvidenceInContext, plain(cc.FulltextOnly), cc.RecentWindow)
	}
	fmt.Fprintf(w, "all\t%d\t%.3f\t%s\t%.3f\n", rep.Questions, rep.EvidenceInContext, plain(rep.FulltextOnly), rep.RecentWindow)
	return w.Flush()
}
