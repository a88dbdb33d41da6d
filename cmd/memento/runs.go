package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/run"
)

func newRunsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Inspect durable runs on a server",
	}
	addClientFlags(cmd, &cf)
	cmd.AddCommand(
		newRunsListCmd(&cf),
		newRunsShowCmd(&cf),
		newRunsEventsCmd(&cf),
		newRunsCheckpointsCmd(&cf),
		newRunsForkCmd(&cf),
	)
	return cmd
}

func newRunsListCmd(cf *clientFlags) *cobra.Command {
	var (
		o   client.ListRunsOptions
		st  string
		all bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List runs, oldest first",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			o.Status = run.Status(st)
			var page client.Page[run.Run]
			if all {
				page.Items = []run.Run{}
				for r, err := range c.Runs(cmd.Context(), o) {
					if err != nil {
						return err
					}
					page.Items = append(page.Items, r)
				}
			} else if page, err = c.ListRuns(cmd.Context(), o); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, page)
			}
			t := newTable(out, "RUN ID", "WORKFLOW", "STATUS", "NEXT STEP", "REV", "UPDATED")
			for _, r := range page.Items {
				t.row(r.RunID, r.WorkflowName, string(r.Status), orDash(r.NextStep), strconv.FormatInt(r.StateRevision, 10), fmtTime(r.UpdatedAt))
			}
			return t.flushPage(cmd.ErrOrStderr(), "cursor", page.NextCursor)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&st, "status", "", "only runs in this status (running, suspended, completed, failed, cancelled)")
	fl.StringVar(&o.Workflow, "workflow", "", "only runs of this workflow")
	fl.StringVar(&o.Cursor, "cursor", "", "continue after a previous page")
	fl.IntVar(&o.Limit, "limit", 0, "page size (server default 100, at most 1000)")
	fl.BoolVar(&all, "all", false, "fetch every page")
	return cmd
}

func newRunsShowCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show a run and its state",
		Args:  cobra.ExactArgs(1),
		// "get" is what other CLIs call it.
		SuggestFor: []string{"get"},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			r, err := c.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, r)
			}
			return printRun(cmd, r)
		},
	}
}

func printRun(cmd *cobra.Command, r run.Run) error {
	out := cmd.OutOrStdout()
	t := newTable(out, "FIELD", "VALUE")
	t.row("run_id", r.RunID)
	t.row("tenant_id", r.TenantID)
	t.row("workflow", r.WorkflowName+" "+r.WorkflowVersion)
	t.row("status", string(r.Status))
	if r.StatusReason != "" {
		t.row("status_reason", r.StatusReason)
	}
	t.row("next_step", orDash(r.NextStep))
	t.row("state_revision", strconv.FormatInt(r.StateRevision, 10))
	t.row("state_schema_version", strconv.Itoa(r.StateSchemaVersion))
	if r.LeaseOwner != "" {
		exp := "-"
		if r.LeaseExpiresAt != nil {
			exp = fmtTime(*r.LeaseExpiresAt)
		}
		t.row("lease", fmt.Sprintf("%s epoch %d until %s", r.LeaseOwner, r.LeaseEpoch, exp))
	} else {
		t.row("lease", fmt.Sprintf("free (epoch %d)", r.LeaseEpoch))
	}
	if r.ParentRunID != "" {
		t.row("forked_from", fmt.Sprintf("%s@%d", r.ParentRunID, r.ParentRevision))
	}
	t.row("created_at", fmtTime(r.CreatedAt))
	t.row("updated_at", fmtTime(r.UpdatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	return printState(out, r.State)
}

func newRunsEventsCmd(cf *clientFlags) *cobra.Command {
	var (
		after int64
		limit int
	)
	cmd := &cobra.Command{
		Use:   "events RUN_ID",
		Short: "List a run's events in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			page, err := c.Events(cmd.Context(), args[0], after, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, page)
			}
			t := newTable(out, "SEQ", "TYPE", "STEP", "ATTEMPT", "CREATED", "PAYLOAD")
			for _, e := range page.Items {
				t.row(strconv.FormatInt(e.Seq, 10), e.EventType, orDash(e.StepID), strconv.Itoa(e.Attempt), fmtTime(e.CreatedAt), truncate(string(e.Payload), 60))
			}
			return t.flushPage(cmd.ErrOrStderr(), "after", page.NextCursor)
		},
	}
	cmd.Flags().Int64Var(&after, "after", 0, "only events after this seq")
	cmd.Flags().IntVar(&limit, "limit", 0, "page size (server default 100, at most 1000)")
	return cmd
}

func newRunsCheckpointsCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoints RUN_ID",
		Short: "List a run's checkpoints",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			cps, err := c.Checkpoints(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, client.Page[run.Checkpoint]{Items: cps})
			}
			t := newTable(out, "LABEL", "REVISION", "CREATED")
			for _, cp := range cps {
				t.row(cp.Label, strconv.FormatInt(cp.Revision, 10), fmtTime(cp.CreatedAt))
			}
			return t.flush()
		},
	}
}

func newRunsForkCmd(cf *clientFlags) *cobra.Command {
	var (
		req run.ForkRequest
		key string
	)
	cmd := &cobra.Command{
		Use:   "fork RUN_ID (--from-revision N | --checkpoint LABEL)",
		Short: "Fork a new run from a past revision or a checkpoint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var opts []client.CallOption
			if key != "" {
				opts = append(opts, client.IdempotencyKey(key))
			}
			r, err := c.Fork(cmd.Context(), args[0], req, opts...)
			if err != nil {
				return err
			}
			if cf.asJSON {
				return printJSON(cmd.OutOrStdout(), r)
			}
			return printRun(cmd, r)
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&req.FromRevision, "from-revision", 0, "fork at this revision")
	fl.StringVar(&req.Checkpoint, "checkpoint", "", "fork at this checkpoint label")
	fl.StringVar(&req.RunID, "run-id", "", "id of the new run (default: generated)")
	fl.StringVar(&key, "idempotency-key", "", "run again with the same key after a timeout, it answers the fork the first call made instead of making another")
	cmd.MarkFlagsOneRequired("from-revision", "checkpoint")
	cmd.MarkFlagsMutuallyExclusive("from-revision", "checkpoint")
	return cmd
}
