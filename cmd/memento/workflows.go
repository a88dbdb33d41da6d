package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/run"
)

func newWorkflowsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "Manage what a server knows of workflows (state schemas)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	addClientFlags(cmd, &cf)
	schemas := &cobra.Command{
		Use:   "schemas",
		Short: "Register, read and list the JSON Schemas of workflow state versions",
		Long: `A registered state schema is immutable: registering the same schema again
changes nothing, another schema for a registered version is refused (register
a new version instead). Every commit and create at a version is validated
against its schema; once a workflow has one, versions without one are refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	schemas.AddCommand(newSchemasPutCmd(&cf), newSchemasGetCmd(&cf), newSchemasListCmd(&cf))
	cmd.AddCommand(schemas)
	return cmd
}

func parseVersion(s string) (int, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("version %q: want a positive integer", s)
	}
	return int(v), nil
}

func newSchemasPutCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "put NAME VERSION FILE|-",
		Short: "Register the JSON Schema in FILE (- for stdin) for a workflow's state version",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseVersion(args[1])
			if err != nil {
				return err
			}
			var doc []byte
			if args[2] == "-" {
				doc, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), run.MaxSchemaBytes+1))
			} else {
				doc, err = os.ReadFile(args[2])
			}
			if err != nil {
				return fmt.Errorf("read schema: %w", err)
			}
			if !json.Valid(doc) {
				return fmt.Errorf("read schema %s: not valid JSON", args[2])
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			s, created, err := c.PutSchema(cmd.Context(), args[0], v, doc)
			if err != nil {
				return err
			}
			if cf.asJSON {
				return printJSON(cmd.OutOrStdout(), s)
			}
			what := "registered"
			if !created {
				what = "already registered (unchanged)"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s v%d %s: %s\n", s.WorkflowName, s.Version, what, s.Digest)
			return err
		},
	}
}

func newSchemasGetCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME VERSION",
		Short: "Print the JSON Schema registered for a workflow's state version",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseVersion(args[1])
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			s, err := c.GetSchema(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			if cf.asJSON {
				return printJSON(cmd.OutOrStdout(), s)
			}
			return printJSON(cmd.OutOrStdout(), s.Schema)
		},
	}
}

func newSchemasListCmd(cf *clientFlags) *cobra.Command {
	var (
		cursor string
		limit  int
	)
	cmd := &cobra.Command{
		Use:     "list NAME",
		Aliases: []string{"ls"},
		Short:   "List the state schema versions registered for a workflow",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			page, err := c.ListSchemas(cmd.Context(), args[0], cursor, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				if page.Items == nil {
					page.Items = []run.Schema{}
				}
				return printJSON(out, client.Page[run.Schema]{Items: page.Items, NextCursor: page.NextCursor})
			}
			t := newTable(out, "VERSION", "DIGEST", "CREATED")
			for _, s := range page.Items {
				t.row(strconv.Itoa(s.Version), s.Digest, fmtTime(s.CreatedAt))
			}
			return t.flushPage(cmd.ErrOrStderr(), "cursor", page.NextCursor)
		},
	}
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue after a previous page")
	cmd.Flags().IntVar(&limit, "limit", 0, "page size (server default 100, at most 1000)")
	return cmd
}
