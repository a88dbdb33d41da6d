package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/retrieval"
)

func newDocsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "docs",
		Short: "Documents for retrieval on a server: put, rm, retrieve, snapshot, member, invalidations",
		Long: `Documents for retrieval on a server.

A document is a projection of a source system: its content is cut into
token chunks, each with a digest, and its ACL says who may read it
(user:..., group:..., tenant). Retrieval applies the ACL before ranking and
stores a snapshot that later returns exactly the same hits and texts.`,
	}
	addClientFlags(cmd, &cf)
	cmd.AddCommand(newDocsPutCmd(&cf), newDocsRmCmd(&cf), newDocsRetrieveCmd(&cf), newDocsSnapshotCmd(&cf),
		newDocsMemberCmd(&cf), newDocsInvalidationsCmd(&cf))
	return cmd
}

func newDocsPutCmd(cf *clientFlags) *cobra.Command {
	var (
		in       retrieval.PutRequest
		file     string
		metadata string
	)
	cmd := &cobra.Command{
		Use:   "put DOCUMENT_ID (--file F | --content TEXT) --acl ENTRY...",
		Short: "Index a document version with its ACL (a new version re-chunks it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case file != "" && in.Content != "":
				return fmt.Errorf("give --file or --content, not both")
			case file == "-":
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), retrieval.MaxContentBytes+1))
				if err != nil {
					return fmt.Errorf("read content from stdin: %w", err)
				}
				in.Content = string(b)
			case file != "":
				b, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("read content: %w", err)
				}
				in.Content = string(b)
			}
			if metadata != "" {
				if !json.Valid([]byte(metadata)) {
					return fmt.Errorf("--metadata must be a JSON object")
				}
				in.Metadata = json.RawMessage(metadata)
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			in.DocumentID = args[0]
			res, err := c.PutDocument(cmd.Context(), in)
			if err != nil {
				return err
			}
			if cf.asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s version %d: %s, acl %v\n", res.Outcome, res.DocumentID, res.Version, plural(res.Chunks, "chunk", "chunks"), res.ACL)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "read the content from this file (- for stdin)")
	f.StringVar(&in.Content, "content", "", "the content")
	f.StringSliceVar(&in.ACL, "acl", nil, "who may read: user:ID, group:NAME or tenant (repeat or comma-separate)")
	f.StringVar(&in.SourceURI, "source-uri", "", "where the document lives in its source system")
	f.StringVar(&in.SourceVersion, "source-version", "", "the source system's version (etag)")
	f.StringVar(&metadata, "metadata", "", "a JSON object")
	return cmd
}

func newDocsRmCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm DOCUMENT_ID",
		Short: "Delete a document and every projection row of it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			if err := c.DeleteDocument(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}

func printSnapshot(cmd *cobra.Command, cf *clientFlags, s retrieval.Snapshot) error {
	out := cmd.OutOrStdout()
	if cf.asJSON {
		return printJSON(out, s)
	}
	t := newTable(out, "SCORE", "CHUNK ID", "SOURCE", "SOURCE VERSION", "DIGEST", "TEXT")
	for _, h := range s.Hits {
		t.row(strconv.FormatFloat(h.Score, 'f', 4, 64), h.ChunkID, h.SourceURI, h.SourceVersion, truncate(h.ContentDigest, 19), truncate(h.Text, 60))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "snapshot %s for %s at index version %d, %s\n", s.SnapshotID, s.Principal, s.IndexVersion, plural(len(s.Hits), "hit", "hits"))
	return nil
}

func newDocsRetrieveCmd(cf *clientFlags) *cobra.Command {
	var in retrieval.RetrieveRequest
	cmd := &cobra.Command{
		Use:   "retrieve QUERY --principal P",
		Short: "Retrieve what a principal may read (ACL before ranking); the answer is stored as a snapshot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in.Principal == "" {
				return fmt.Errorf("--principal is required: retrieval answers what one principal may read")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			in.Query = args[0]
			s, err := c.Retrieve(cmd.Context(), in)
			if err != nil {
				return err
			}
			return printSnapshot(cmd, cf, s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Principal, "principal", "", "who reads, e.g. user:alice (required)")
	f.IntVarP(&in.K, "k", "k", 0, "at most this many hits (server default 10)")
	return cmd
}

func newDocsSnapshotCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot SNAPSHOT_ID",
		Short: "Show a stored retrieval snapshot exactly as it was answered",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			s, err := c.RetrievalSnapshot(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printSnapshot(cmd, cf, s)
		},
	}
}

func newDocsMemberCmd(cf *clientFlags) *cobra.Command {
	var remove bool
	cmd := &cobra.Command{
		Use:   "member GROUP PRINCIPAL [--rm]",
		Short: "Add a principal to a group (or remove it with --rm); the next retrieval sees the change",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			if err := c.SetGroupMember(cmd.Context(), args[0], args[1], !remove); err != nil {
				return err
			}
			verb := "added to"
			if remove {
				verb = "removed from"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s group %s\n", args[1], verb, args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&remove, "rm", false, "remove the principal from the group")
	return cmd
}

func newDocsInvalidationsCmd(cf *clientFlags) *cobra.Command {
	var (
		cursor string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "invalidations",
		Short: "List invalidation events (new versions, deletions, ACL and membership changes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			p, err := c.Invalidations(cmd.Context(), cursor, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cf.asJSON {
				return printJSON(out, p)
			}
			t := newTable(out, "INDEX VERSION", "KIND", "DOCUMENT", "VERSIONS", "GROUP", "PRINCIPAL", "ROWS REMOVED", "AT")
			for _, ev := range p.Items {
				t.row(strconv.FormatInt(ev.IndexVersion, 10), string(ev.Kind), orDash(ev.DocumentID), invalidationVersions(ev),
					orDash(ev.Group), orDash(strings.TrimSpace(ev.Principal+" "+ev.Change)), strconv.Itoa(ev.RowsRemoved), fmtTime(ev.At))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if p.NextCursor != "" {
				fmt.Fprintf(out, "more: --cursor %s\n", p.NextCursor)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue after this cursor")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (server default 100)")
	return cmd
}

// invalidationVersions is the VERSIONS cell of an invalidation: the
// document version it left and the one it moved to. A deletion moves to no
// version, and a membership change concerns no document (both versions are
// zero, which printed as "0→0").
func invalidationVersions(ev retrieval.Invalidation) string {
	switch {
	case ev.Kind == retrieval.DocumentDeleted:
		return fmt.Sprintf("%d→deleted", ev.OldVersion)
	case ev.OldVersion == 0 && ev.NewVersion == 0:
		return "-"
	default:
		return fmt.Sprintf("%d→%d", ev.OldVersion, ev.NewVersion)
	}
}
