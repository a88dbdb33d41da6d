package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
	"github.com/mementohq/memento/llm/glove"
	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/tokens"
)

type benchLocomoFlags struct {
	data     string
	backend  string
	embedder string
	postgres string
	ks       []int
	modes    []string
	only     []string
	ingest   string
	distinct bool
	asJSON   bool
	quiet    bool
}

func newBenchLocomoCmd() *cobra.Command {
	var f benchLocomoFlags
	cmd := &cobra.Command{
		Use:   "locomo",
		Short: "Evidence recall of memory search on a LoCoMo file (full text, vectors, hybrid)",
		Long: `Ingest every turn of each conversation of a file in the LoCoMo layout
(Maharana et al., ACL 2024) as a long-term memory item through the memory
service: subject = the conversation's sample_id, key = the turn's dia_id,
provenance message/dia_id, validated_by imported, valid_from = the session's
date, searchable text = "[date] speaker: text [shares a photo: caption]",
plus (multi-granularity, --ingest) one item per window of 8 consecutive
turns of a session every 4 turns, in namespace "windows", naming all its
turns in message_ids (memory.ConversationInputs). Search drops hits whose
turns better hits already name (--distinct). A window hit finds every
evidence turn it names, and its whole text counts in the tokens.
Then search every question of categories 1-4 (multi-hop, temporal,
open-domain, single-hop; 5 is adversarial, with no evidence to find) and
score evidence recall@k: the fraction of the question's evidence turns named
by the message_ids of the top k hits. Malformed evidence ids ("D8:6; D9:17",
"D:11:26") are normalised and counted. Reported per mode and category, with
the mean tokens (o200k) of the top hits' text.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchLocomo(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "", "a JSON file in the LoCoMo layout (required)")
	fl.StringVar(&f.backend, "backend", bench.BackendMemstore, "memory store: memstore, sqlite (temporary directory) or postgres (a schema of its own)")
	fl.StringVar(&f.embedder, "embedder", "hash", "embedder: hash (offline hashing), glove (after memento models install glove) or none (full text only)")
	fl.StringVar(&f.postgres, "postgres", "", "PostgreSQL URL for --backend postgres (env "+envPostgresURL+")")
	fl.IntSliceVar(&f.ks, "k", []int{5, 10}, "cut-offs of recall")
	fl.StringSliceVar(&f.modes, "modes", nil, "search modes (default fulltext, vector, hybrid; fulltext only without an embedder)")
	fl.StringSliceVar(&f.only, "only", nil, "score only these sample_ids (all are ingested)")
	fl.StringVar(&f.ingest, "ingest", bench.DefaultLocomoIngest.Spec(), "ingestion strategy: comma-separated speaker, date, captions, window=N, stride=N (\"text\" for none)")
	fl.BoolVar(&f.distinct, "distinct", true, "search drops hits whose turns better hits already name (memory.SearchQuery.DistinctMessages)")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as one JSON object")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}

func runBenchLocomo(cmd *cobra.Command, f benchLocomoFlags) error {
	if f.data == "" {
		return errors.New("bench locomo: --data FILE is required")
	}
	fh, err := os.Open(f.data)
	if err != nil {
		return fmt.Errorf("bench locomo: %w", err)
	}
	convs, err := bench.ReadLocomo(fh)
	_ = fh.Close()
	if err != nil {
		return fmt.Errorf("bench locomo: %w", err)
	}
	ingest, err := bench.ParseLocomoIngest(f.ingest)
	if err != nil {
		return fmt.Errorf("bench locomo: %w", err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var emb memory.Embedder
	modes := f.modes
	switch f.embedder {
	case "hash":
		emb = hashembed.New(0)
	case "none":
		if len(modes) == 0 {
			modes = []string{memory.ModeFulltext}
		}
	case "glove":
		d, err := glove.DefaultDir()
		if err != nil {
			return fmt.Errorf("bench locomo: %w", err)
		}
		g, err := glove.Load(glove.Path(d))
		if err != nil {
			return fmt.Errorf("bench locomo: load GloVe (run `memento models install glove` first): %w", err)
		}
		emb = g
	default:
		return fmt.Errorf("bench locomo: unknown embedder %q (hash, glove or none)", f.embedder)
	}
	store, closeStore, err := bench.OpenMemoryStore(ctx, f.backend, flagOrEnv(cmd, "postgres", f.postgres, envPostgresURL, ""))
	if err != nil {
		return fmt.Errorf("bench locomo: %w", err)
	}
	defer closeStore()
	counter, err := tokens.Encoding(tokens.O200kBase)
	if err != nil {
		counter = tokens.Approx()
	}
	cfg := bench.LocomoConfig{
		Conversations: convs,
		Service:       memory.NewService(store, memory.Options{Embedder: emb}),
		Ingest:        ingest,
		Modes:         modes,
		Ks:            f.ks,
		Distinct:      f.distinct,
		CountTokens:   counter.Count,
		Progress:      cmd.ErrOrStderr(),
	}
	if f.quiet {
		cfg.Progress = nil
	}
	if len(f.only) > 0 {
		cfg.Only = map[string]bool{}
		for _, s := range f.only {
			cfg.Only[s] = true
		}
	}
	rep, err := bench.RunLocomo(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench locomo: %w", err)
	}
	rep.Tokenizer = counter.Name()
	if f.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		return enc.Encode(struct {
			*bench.LocomoReport
			Backend  string `json:"backend"`
			Embedder string `json:"embedder"`
		}{rep, f.backend, f.embedder})
	}
	writeLocomoTable(cmd.OutOrStdout(), rep, f.ks)
	return nil
}

func writeLocomoTable(w io.Writer, rep *bench.LocomoReport, ks []int) {
	fmt.Fprintf(w, "LoCoMo evidence recall: %d conversations, %d questions, %d turns ingested (%s)\n",
		rep.Conversations, rep.Questions, rep.Turns, rep.Ingest)
	fmt.Fprintf(w, "evidence ids: %d, normalised %d, unresolved %d, questions without evidence %d\n",
		rep.Evidence.Entries, rep.Evidence.Normalised, rep.Evidence.Unresolved, rep.Evidence.NoEvidenceQAs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"mode", "category", "questions"}
	for _, k := range ks {
		head = append(head, fmt.Sprintf("recall@%d", k))
	}
	head = append(head, "tokens")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	modes := make([]string, 0, len(rep.Modes))
	for m := range rep.Modes {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	for _, m := range modes {
		mr := rep.Modes[m]
		cats := make([]string, 0, len(mr.ByCategory))
		for c := range mr.ByCategory {
			cats = append(cats, c)
		}
		sort.Strings(cats)
		for _, c := range append(cats, "all") {
			row := []string{m, c}
			rec, n := mr.Recall, rep.Questions
			if c != "all" {
				rec, n = mr.ByCategory[c].Recall, mr.ByCategory[c].Questions
			}
			row = append(row, fmt.Sprint(n))
			for _, k := range ks {
				row = append(row, fmt.Sprintf("%.3f", rec[fmt.Sprintf("recall@%d", k)]))
			}
			if c == "all" {
				row = append(row, fmt.Sprintf("%.0f", mr.MeanTopTokens))
			} else {
				row = append(row, "")
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	_ = tw.Flush()
}
