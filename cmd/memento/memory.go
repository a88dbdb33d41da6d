package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/memory"
)

func newMemoryCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Long-term memory on a server: add, list, search, history, forget, extract",
		Long: `Long-term memory on a server.

A claim is one narrow fact about a subject (a user, an account), kept with
its provenance. A new value for the same subject, namespace and key
supersedes the current one, which stays in the history; an exact duplicate
is merged; a model's guess is refused and a sensitive category is held until
confirmed. Forgetting a subject removes its claims everywhere and leaves
tombstones so they cannot come back.`,
	}
	addClientFlags(cmd, &cf)
	cmd.AddCommand(newMemoryAddCmd(&cf), newMemoryLsCmd(&cf), newMemorySearchCmd(&cf), newMemoryHistoryCmd(&cf),
		newMemoryForgetCmd(&cf), newMemoryExtractCmd(&cf), newMemoryProfileCmd(&cf), newMemoryHeldCmd(&cf),
		newMemoryConfirmCmd(&cf), newMemoryRejectCmd(&cf), newMemoryNamespaceCmd(&cf))
	return cmd
}

// memoryValue reads a --value: JSON if it parses as JSON, else a string.
func memoryValue(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// showValue prints a JSON string bare and anything else as compact JSON.
func showValue(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func source(p memory.Provenance) string { return p.SourceType + ":" + p.SourceID }

func needSubject(subject string) error {
	if subject == "" {
		return fmt.Errorf("--subject is required: memory is kept per subject")
	}
	return nil
}

// printWrite reports what a write did with a claim.
func printWrite(cmd *cobra.Command, cf *clientFlags, r memory.AddResult) error {
	out := cmd.OutOrStdout()
	if cf.asJSON { // the API's shape: the claim's fields and what the write did
		return printJSON(out, struct {
			memory.Claim
			Outcome    memory.Outcome `json:"outcome"`
			Reason     string         `json:"reason,omitempty"`
			Superseded string         `json:"superseded,omitempty"`
			MergedInto string         `json:"merged_into,omitempty"`
		}{r.Claim, r.Outcome, r.Reason, r.Superseded, r.MergedInto})
	}
	c := r.Claim
	fmt.Fprintf(out, "%s %s: %s = %s\n", r.Outcome, c.MemoryID, c.Key, truncate(showValue(c.Value), 80))
	switch {
	case r.Superseded != "":
		fmt.Fprintf(out, "supersedes %s\n", r.Superseded)
	case r.MergedInto != "":
		fmt.Fprintf(out, "an exact duplicate: merged into %s (seen %s)\n", r.MergedInto, plural(c.Confirmations, "time", "times"))
	}
	if r.Reason != "" {
		fmt.Fprintln(out, r.Reason)
	}
	return nil
}

func newMemoryAddCmd(cf *clientFlags) *cobra.Command {
	var (
		in                      memory.AddInput
		value                   string
		confidence              float64
		ttl                     time.Duration
		sourceType, validatedBy string
		sourceID, sourceVersion string
		runID                   string
		eventSeq                int64
		messageIDs              []string
	)
	cmd := &cobra.Command{
		Use:   "add --subject S --key K --value V --source-id ID",
		Short: "Add a claim with its provenance; says whether it was added, superseded another, merged or held",
		Long: `Add a claim with its provenance.

--value is JSON when it parses as JSON (42, true, {"a":1}, "quoted"), and a
string otherwise. The provenance is --source-type (message, run_event, tool,
user, operator, document, import), --source-id and --validated-by
(user_stated, user_confirmed, tool_confirmed, operator, imported).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needSubject(in.SubjectID); err != nil {
				return err
			}
			if in.Key == "" || !cmd.Flags().Changed("value") {
				return fmt.Errorf("--key and --value are required")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			in.Value = memoryValue(value)
			in.Provenance = memory.Provenance{SourceType: sourceType, SourceID: sourceID, SourceVersion: sourceVersion, RunID: runID,
				EventSeq: eventSeq, MessageIDs: messageIDs, ValidatedBy: validatedBy}
			if cmd.Flags().Changed("confidence") {
				in.Confidence = &confidence
			}
			if ttl > 0 {
				in.TTLSeconds = int64((ttl + time.Second - 1) / time.Second)
			}
			r, err := c.AddMemory(cmd.Context(), in)
			if err != nil {
				return err
			}
			return printWrite(cmd, cf, r)
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.SubjectID, "subject", "", "the subject the claim is about (required)")
	f.StringVar(&in.Namespace, "namespace", "", "namespace (default \"default\")")
	f.StringVar(&in.Key, "key", "", "the claim's key, e.g. preferences.language (required)")
	f.StringVar(&value, "value", "", "the value: JSON, or else a string (required)")
	f.StringVar(&in.Text, "text", "", "searchable text (default: rendered from key and value)")
	f.StringVar(&in.Category, "category", "", "a coarse kind; sensitive ones (health, religion...) are held for confirmation")
	f.StringVar(&in.ConsentBasis, "consent", "", "the consent basis (required in a personal namespace)")
	f.StringVar(&in.Supersedes, "supersedes", "", "the current claim this one corrects (refused if it is no longer current)")
	f.Float64Var(&confidence, "confidence", 1, "confidence in [0, 1]")
	f.DurationVar(&ttl, "ttl", 0, "lifetime, e.g. 720h (default: the namespace's, or none)")
	f.StringVar(&sourceType, "source-type", memory.SourceUser, "provenance: where the claim came from")
	f.StringVar(&sourceID, "source-id", "", "provenance: the source's id (required)")
	f.StringVar(&sourceVersion, "source-version", "", "provenance: the source's version")
	f.StringVar(&runID, "run", "", "provenance: the run that produced the claim")
	f.Int64Var(&eventSeq, "event-seq", 0, "provenance: the run event's seq")
	f.StringSliceVar(&messageIDs, "message-id", nil, "provenance: the message ids that state the claim")
	f.StringVar(&validatedBy, "validated-by", memory.ValidatedUserStated, "provenance: how the claim was validated")
	return cmd
}

// claimTable prints claims one per line.
func claimTable(out io.Writer, cs []memory.Claim) error {
	t := newTable(out, "MEMORY ID", "NAMESPACE", "KEY", "VALUE", "STATUS", "SOURCE", "VALID FROM", "EXPIRES")
	for _, c := range cs {
		t.row(c.MemoryID, c.Namespace, c.Key, truncate(showValue(c.Value), 60), string(c.Status), source(c.Provenance), fmtTime(c.ValidFrom), fmtTimePtr(c.ExpiresAt))
	}
	return t.flush()
}

func printPage(cmd *cobra.Command, cf *clientFlags, p client.Page[memory.Claim]) error {
	out := cmd.OutOrStdout()
	if cf.asJSON {
		if p.Items == nil {
			p.Items = []memory.Claim{}
		}
		return printJSON(out, p)
	}
	if err := claimTable(out, p.Items); err != nil {
		return err
	}
	if p.NextCursor != "" {
		fmt.Fprintf(out, "more: --cursor %s\n", p.NextCursor)
	}
	return nil
}

// addQueryFlags binds the list filters.
func addQueryFlags(cmd *cobra.Command, q *memory.Query) {
	f := cmd.Flags()
	f.StringVar(&q.SubjectID, "subject", "", "the subject (required)")
	f.StringVar(&q.Namespace, "namespace", "", "only this namespace")
	f.StringVar(&q.Key, "key", "", "only this key")
	f.StringVar(&q.Cursor, "cursor", "", "continue after a previous page")
	f.IntVar(&q.Limit, "limit", 0, "at most this many (server default 100)")
}

func newMemoryLsCmd(cf *clientFlags) *cobra.Command {
	var (
		q    memory.Query
		asOf string
	)
	cmd := &cobra.Command{
		Use:     "ls --subject S",
		Aliases: []string{"list"},
		Short:   "List a subject's current claims (or those in force at --as-of)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needSubject(q.SubjectID); err != nil {
				return err
			}
			if asOf != "" {
				t, err := time.Parse(time.RFC3339Nano, asOf)
				if err != nil {
					return fmt.Errorf("--as-of must be an RFC 3339 time: %w", err)
				}
				q.AsOf = &t
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			p, err := c.ListMemories(cmd.Context(), q)
			if err != nil {
				return err
			}
			return printPage(cmd, cf, p)
		},
	}
	addQueryFlags(cmd, &q)
	cmd.Flags().StringVar(&asOf, "as-of", "", "the claims in force at this RFC 3339 time")
	return cmd
}

func newMemoryHeldCmd(cf *clientFlags) *cobra.Command {
	var q memory.Query
	cmd := &cobra.Command{
		Use:   "held --subject S",
		Short: "List a subject's claims held for confirmation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needSubject(q.SubjectID); err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			p, err := c.HeldMemories(cmd.Context(), q)
			if err != nil {
				return err
			}
			return printPage(cmd, cf, p)
		},
	}
	addQueryFlags(cmd, &q)
	return cmd
}

func newMemorySearchCmd(cf *clientFlags) *cobra.Command {
	var (
		q        memory.SearchQuery
		halfLife time.Duration
	)
	cmd := &cobra.Command{
		Use:   "search QUERY --subject S",
		Short: "Search a subject's live claims (full text, or hybrid with vectors by --mode or a real embedder); hits show their source",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needSubject(q.SubjectID); err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			q.Query, q.HalfLife = args[0], halfLife
			res, err := c.SearchMemories(cmd.Context(), q)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, res)
			}
			t := newTable(out, "SCORE", "MEMORY ID", "NAMESPACE", "KEY", "VALUE", "SOURCE")
			for _, h := range res.Items {
				t.row(strconv.FormatFloat(h.Score, 'f', 4, 64), h.MemoryID, h.Namespace, h.Key, truncate(showValue(h.Value), 60), source(h.Provenance))
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(out, "mode %s, %s\n", res.Mode, plural(len(res.Items), "hit", "hits"))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.SubjectID, "subject", "", "the subject (required)")
	f.StringVar(&q.Namespace, "namespace", "", "only this namespace")
	f.IntVarP(&q.K, "k", "k", 0, "at most this many hits (server default 10)")
	f.StringVar(&q.Mode, "mode", "", "hybrid, fulltext or vector (default: the server's, fulltext with the offline hashing embedder)")
	f.DurationVar(&halfLife, "half-life", 0, "weigh hits by age with this half-life, e.g. 720h (default off)")
	return cmd
}

func newMemoryHistoryCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "history MEMORY_ID",
		Short: "Show the supersession chain of a claim's key, oldest first, with provenance",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			h, err := c.MemoryHistory(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				if h == nil {
					h = []memory.Claim{}
				}
				return printJSON(out, h)
			}
			t := newTable(out, "MEMORY ID", "STATUS", "VALUE", "SOURCE", "VALIDATED BY", "VALID FROM", "CREATED", "REASON")
			for _, c := range h {
				t.row(c.MemoryID, string(c.Status), truncate(showValue(c.Value), 60), source(c.Provenance), c.Provenance.ValidatedBy,
					fmtTime(c.ValidFrom), fmtTime(c.CreatedAt), orDash(c.InvalidationReason))
			}
			return t.flush()
		},
	}
}

// subjectOf is the subject a command names, as its argument or with
// --subject (as the other memory commands take it), not both differently.
func subjectOf(args []string, flag string) (string, error) {
	switch {
	case len(args) == 1 && flag != "" && flag != args[0]:
		return "", fmt.Errorf("the subject is %q or %q: give it once, as SUBJECT_ID or --subject", args[0], flag)
	case len(args) == 1:
		return args[0], nil
	case flag != "":
		return flag, nil
	}
	return "", errors.New("a subject is required: SUBJECT_ID or --subject")
}

func newMemoryForgetCmd(cf *clientFlags) *cobra.Command {
	var namespace, reason, subject string
	cmd := &cobra.Command{
		Use:   "forget SUBJECT_ID",
		Short: "Forget a subject's memory everywhere (all, or one --namespace), leaving tombstones",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sub, err := subjectOf(args, subject)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("namespace") && namespace == "" {
				// Most likely a variable left unset: forgetting every
				// namespace is asked for by leaving the flag out.
				return fmt.Errorf("--namespace is empty: name one, or leave the flag out to forget every namespace")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			rec, err := c.ForgetSubject(cmd.Context(), sub, namespace, reason)
			if err != nil {
				return err
			}
			if cf.asJSON {
				return printJSON(cmd.OutOrStdout(), rec)
			}
			scope := "every namespace"
			if rec.Namespace != "" {
				scope = "namespace " + rec.Namespace
			}
			fmt.Fprintf(cmd.OutOrStdout(), "forgot %s of %s in %s (%s; record %s)\n", plural(rec.Claims, "claim", "claims"), rec.SubjectID, scope, plural(rec.Tombstones, "tombstone", "tombstones"), rec.ForgetID)
			return nil
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", "", "only this namespace")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit record")
	cmd.Flags().StringVar(&subject, "subject", "", "the subject (instead of SUBJECT_ID)")
	return cmd
}

func newMemoryExtractCmd(cf *clientFlags) *cobra.Command {
	var (
		in       memory.ExtractInput
		file     string
		messages []string
	)
	cmd := &cobra.Command{
		Use:   "extract --subject S (--message TEXT ... | --file MESSAGES.json)",
		Short: "Extract candidate claims from messages; --apply writes what policy keeps",
		Long: `Extract candidate claims from messages and say what policy does with each.

Messages are --message TEXT (user messages, repeatable) or --file, a JSON
array of {"role", "content", "id"} ("-" reads standard input). Without
--apply nothing is written. Every message gives a candidate or is listed as
skipped, with the reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needSubject(in.SubjectID); err != nil {
				return err
			}
			for _, m := range messages {
				in.Messages = append(in.Messages, memory.Message{Role: "user", Content: m})
			}
			if file != "" {
				var r io.Reader = cmd.InOrStdin()
				if file != "-" {
					f, err := os.Open(file)
					if err != nil {
						return err
					}
					defer f.Close()
					r = f
				}
				var ms []struct {
					Role    string `json:"role"`
					Content string `json:"content"`
					ID      string `json:"id"`
				}
				if err := json.NewDecoder(r).Decode(&ms); err != nil {
					return fmt.Errorf("--file: a JSON array of {role, content, id}: %w", err)
				}
				for _, m := range ms {
					in.Messages = append(in.Messages, memory.Message{ID: m.ID, Role: m.Role, Content: m.Content})
				}
			}
			if len(in.Messages) == 0 {
				return fmt.Errorf("give messages with --message or --file")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			res, err := c.ExtractMemories(cmd.Context(), in)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, struct {
					Items     []memory.ExtractItem `json:"items"`
					Skipped   []skippedJSON        `json:"skipped"`
					Extractor string               `json:"extractor"`
					Applied   bool                 `json:"applied"`
				}{res.Items, skippedOf(res.Skipped), res.Extractor, res.Applied})
			}
			t := newTable(out, "OUTCOME", "KEY", "VALUE", "MEMORY ID", "MESSAGES", "REASON")
			for _, it := range res.Items {
				t.row(string(it.Outcome), it.Candidate.Key, truncate(showValue(it.Candidate.Value), 50), orDash(it.MemoryID),
					fmt.Sprint(it.Candidate.MessageIDs), orDash(it.Reason))
			}
			if err := t.flush(); err != nil {
				return err
			}
			for _, s := range res.Skipped {
				fmt.Fprintf(out, "skipped %s: %s\n", s.MessageID, s.Reason)
			}
			verb := "would be written (dry run; --apply writes)"
			if res.Applied {
				verb = "applied"
			}
			fmt.Fprintf(out, "%s, %s skipped, by %s: %s\n", plural(len(res.Items), "candidate", "candidates"), plural(len(res.Skipped), "message", "messages"), res.Extractor, verb)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.SubjectID, "subject", "", "the subject (required)")
	f.StringVar(&in.Namespace, "namespace", "", "namespace of the candidates (default \"default\")")
	f.StringArrayVar(&messages, "message", nil, "a user message (repeatable)")
	f.StringVar(&file, "file", "", "a JSON array of messages {role, content, id}; - for standard input")
	f.BoolVar(&in.Apply, "apply", false, "write the candidates policy keeps")
	f.StringVar(&in.SourceType, "source-type", "", "provenance: where the messages come from (default message)")
	f.StringVar(&in.SourceID, "source-id", "", "provenance: e.g. the session id (default: each message id)")
	f.StringVar(&in.RunID, "run", "", "provenance: the run the messages belong to")
	f.StringVar(&in.ConsentBasis, "consent", "", "the consent basis (required in a personal namespace)")
	return cmd
}

type skippedJSON struct {
	MessageID string `json:"message_id"`
	Reason    string `json:"reason"`
}

func skippedOf(ss []memory.SkippedMessage) []skippedJSON {
	out := make([]skippedJSON, len(ss))
	for i, s := range ss {
		out[i] = skippedJSON{s.MessageID, s.Reason}
	}
	return out
}

func newMemoryProfileCmd(cf *clientFlags) *cobra.Command {
	var subject string
	cmd := &cobra.Command{
		Use:   "profile SUBJECT_ID",
		Short: "Show a subject's current claims as one compact view per namespace, with token counts",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sub, err := subjectOf(args, subject)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			p, err := c.Profile(cmd.Context(), sub)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, p)
			}
			fmt.Fprintf(out, "%s: %s, %s (%s)\n", p.SubjectID, plural(p.Claims, "claim", "claims"), plural(p.Tokens, "token", "tokens"), p.Tokenizer)
			for _, ns := range p.Namespaces {
				fmt.Fprintf(out, "\n[%s] %d tokens\n%s", ns.Namespace, ns.Tokens, ns.Text)
			}
			if p.Truncated {
				fmt.Fprintf(out, "\n%s left out\n", plural(p.Omitted, "claim", "claims"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&subject, "subject", "", "the subject (instead of SUBJECT_ID)")
	return cmd
}

func newMemoryConfirmCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "confirm MEMORY_ID",
		Short: "Confirm a held claim: it becomes current",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			r, err := c.ConfirmMemory(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printWrite(cmd, cf, r)
		},
	}
}

func newMemoryRejectCmd(cf *clientFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "reject MEMORY_ID",
		Short: "Reject a held claim: it is never served",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			got, err := c.RejectMemory(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			if cf.asJSON {
				return printJSON(cmd.OutOrStdout(), got)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rejected %s: %s = %s\n", got.MemoryID, got.Key, truncate(showValue(got.Value), 80))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why")
	return cmd
}

func newMemoryNamespaceCmd(cf *clientFlags) *cobra.Command {
	var (
		personal, sensitive bool
		ttl                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "namespace NAME [--personal] [--sensitive] [--ttl D]",
		Short: "Show a namespace's policy, or declare it with --personal, --sensitive, --ttl (admin key)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var ns memory.Namespace
			if cmd.Flags().Changed("personal") || cmd.Flags().Changed("sensitive") || cmd.Flags().Changed("ttl") {
				ns, err = c.DeclareNamespace(cmd.Context(), memory.Namespace{Name: args[0], Personal: personal, Sensitive: sensitive, TTL: ttl})
			} else {
				ns, err = c.MemoryNamespace(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, map[string]any{"namespace": ns.Name, "personal": ns.Personal, "sensitive": ns.Sensitive, "ttl_seconds": int64(ns.TTL / time.Second)})
			}
			t := newTable(out, "NAMESPACE", "PERSONAL", "SENSITIVE", "TTL")
			t.row(ns.Name, strconv.FormatBool(ns.Personal), strconv.FormatBool(ns.Sensitive), ns.TTL.String())
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&personal, "personal", false, "claims here need a consent basis")
	cmd.Flags().BoolVar(&sensitive, "sensitive", false, "claims here are held until confirmed")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "default lifetime of a claim here (0: none)")
	return cmd
}
