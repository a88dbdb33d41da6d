package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/session"
)

func newSessionsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Inspect and close session memory on a server",
		Long: `Inspect and close session memory on a server.

A session is bound to one user: every command names it with --user.
Personal data shows as pii:<kind>:<id> references; resolving one needs an
admin key (GET /v1/pii/{ref}).`,
	}
	addClientFlags(cmd, &cf)
	cmd.AddCommand(newSessionsLsCmd(&cf), newSessionsShowCmd(&cf), newSessionsRmCmd(&cf))
	return cmd
}

// sessionClient checks that --user is set, then builds the API client.
func sessionClient(cmd *cobra.Command, cf *clientFlags, user string) (*client.Client, error) {
	if user == "" {
		return nil, fmt.Errorf("--user is required: a session is bound to its user")
	}
	return cf.client(cmd)
}

func newSessionsLsCmd(cf *clientFlags) *cobra.Command {
	var (
		user, cursor string
		limit        int
		all          bool
	)
	cmd := &cobra.Command{
		Use:     "ls --user USER_ID",
		Aliases: []string{"list"},
		Short:   "List a user's live sessions, most recently active first",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := sessionClient(cmd, cf, user)
			if err != nil {
				return err
			}
			page := client.Page[session.Session]{Items: []session.Session{}}
			for {
				p, err := c.ListSessionsPage(cmd.Context(), user, cursor, limit)
				if err != nil {
					return err
				}
				page.Items, page.NextCursor = append(page.Items, p.Items...), p.NextCursor
				if !all || p.NextCursor == "" {
					break
				}
				cursor = p.NextCursor
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, page)
			}
			t := newTable(out, "SESSION ID", "APP", "REV", "MESSAGES", "LAST ACTIVITY", "EXPIRES")
			for _, s := range page.Items {
				t.row(s.SessionID, orDash(s.App), strconv.FormatInt(s.Revision, 10), strconv.Itoa(s.MessageCount), fmtTime(s.LastActivityAt), fmtTime(s.ExpiresAt))
			}
			return t.flushPage(cmd.ErrOrStderr(), "cursor", page.NextCursor)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&user, "user", "", "the user whose sessions to list (required)")
	fl.StringVar(&cursor, "cursor", "", "continue after a previous page")
	fl.IntVar(&limit, "limit", 0, "page size (server default 50, at most 1000)")
	fl.BoolVar(&all, "all", false, "fetch every page")
	return cmd
}

func newSessionsShowCmd(cf *clientFlags) *cobra.Command {
	var (
		user     string
		messages int
	)
	cmd := &cobra.Command{
		Use:   "show SESSION_ID --user USER_ID",
		Short: "Show a session: state, summary and its latest messages",
		Args:  cobra.ExactArgs(1),
		// "get" is what other CLIs call it.
		SuggestFor: []string{"get"},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sessionClient(cmd, cf, user)
			if err != nil {
				return err
			}
			s, err := c.GetSession(cmd.Context(), args[0], user)
			if err != nil {
				return err
			}
			var ms []session.Message
			if messages > 0 {
				if ms, err = c.ListMessages(cmd.Context(), args[0], user, session.MessageQuery{Limit: messages}); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				if ms == nil {
					ms = []session.Message{}
				}
				return printJSON(out, struct {
					Session  session.Session   `json:"session"`
					Messages []session.Message `json:"messages"`
				}{s, ms})
			}
			t := newTable(out, "FIELD", "VALUE")
			t.row("session_id", s.SessionID)
			t.row("user_id", s.UserID)
			t.row("tenant_id", s.TenantID)
			t.row("app", orDash(s.App))
			t.row("revision", strconv.FormatInt(s.Revision, 10))
			t.row("messages", fmt.Sprintf("%d (last seq %d)", s.MessageCount, s.LastSeq))
			t.row("ttl", s.TTL.String())
			t.row("created", fmtTime(s.CreatedAt))
			t.row("last_activity", fmtTime(s.LastActivityAt))
			t.row("expires", fmtTime(s.ExpiresAt))
			if s.Summary != nil {
				t.row("summary", fmt.Sprintf("through seq %d: %s", s.Summary.ThroughSeq, truncate(s.Summary.Text, 100)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if err := printState(out, s.State); err != nil {
				return err
			}
			if len(ms) > 0 {
				fmt.Fprintln(out)
				mt := newTable(out, "SEQ", "ROLE", "TIME", "CONTENT")
				for _, m := range ms {
					mt.row(strconv.FormatInt(m.Seq, 10), m.Role, fmtTime(m.CreatedAt), truncate(m.Content, 80))
				}
				return mt.flush()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the user the session belongs to (required)")
	cmd.Flags().IntVar(&messages, "messages", 10, "show this many latest messages (0: none)")
	return cmd
}

func newSessionsRmCmd(cf *clientFlags) *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "rm SESSION_ID --user USER_ID",
		Short: "Close a session: its state, messages and summary are deleted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sessionClient(cmd, cf, user)
			if err != nil {
				return err
			}
			s, err := c.CloseSession(cmd.Context(), args[0], user)
			if err != nil {
				return err
			}
			if cf.asJSON {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "closed %s (revision %d, %s)\n", s.SessionID, s.Revision, plural(s.MessageCount, "message", "messages"))
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the user the session belongs to (required)")
	return cmd
}
