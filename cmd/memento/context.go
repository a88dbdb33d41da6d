package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/contextbuild"
)

func newContextCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Working memory on a server: build a model context under a token budget",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	addClientFlags(cmd, &cf)
	cmd.AddCommand(newContextBuildCmd(&cf))
	return cmd
}

func newContextBuildCmd(cf *clientFlags) *cobra.Command {
	var (
		r        contextbuild.Request
		messages bool
	)
	cmd := &cobra.Command{
		Use:   "build --model M --budget N [--query Q] [--session S --user U | --run R] [--subject S]",
		Short: "Build a context and show its accounting: tokens per part, sources, what was left out and why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			res, err := c.BuildContext(cmd.Context(), r)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, res)
			}
			a := res.Accounting
			exact := "exact"
			if !a.Exact {
				exact = "approximate"
			}
			fmt.Fprintf(out, "%d of %d tokens (reserve %d), %s, %s\n", a.TotalTokens, a.BudgetTokens, a.ReserveTokens, a.Tokenizer, exact)
			t := newTable(out, "PART", "TOKENS", "SOURCES")
			for _, p := range a.Parts {
				t.row(p.Kind, fmt.Sprint(p.Tokens), truncate(strings.Join(p.SourceIDs, " "), 80))
			}
			for _, l := range a.LeftOut {
				t.row("left out: "+l.Kind, "-", truncate(strings.Join(l.SourceIDs, " ")+" ("+l.Reason+")", 80))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if messages {
				for _, m := range res.Messages {
					fmt.Fprintf(out, "--- %s\n%s\n", m.Role, m.Content)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.Model, "model", "gpt-4o", "model whose tokenizer counts the budget")
	f.IntVar(&r.BudgetTokens, "budget", 0, "budget in tokens (required)")
	f.IntVar(&r.ReserveTokens, "reserve", 0, "tokens kept free for the answer")
	f.StringVar(&r.System, "system", "", "system part (never cut)")
	f.StringVar(&r.Query, "query", "", "the question the context is for")
	f.StringVar(&r.SessionID, "session", "", "build from this session (needs --user)")
	f.StringVar(&r.UserID, "user", "", "the session's user")
	f.StringVar(&r.RunID, "run", "", "build from this run")
	f.StringVar(&r.SubjectID, "subject", "", "long-term memory subject")
	f.IntVar(&r.MemoryK, "memory-k", 0, "memories to retrieve for the query (server default 20)")
	f.BoolVar(&messages, "messages", false, "print the messages too")
	_ = cmd.MarkFlagRequired("budget")
	return cmd
}
