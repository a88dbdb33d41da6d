package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printJSON writes v indented, for --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printState writes a state document indented under a "state:" heading,
// as it came when it is not valid JSON.
func printState(w io.Writer, state json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, state, "", "  "); err != nil {
		buf.Reset()
		buf.Write(state)
	}
	_, err := fmt.Fprintf(w, "\nstate:\n%s\n", buf.String())
	return err
}

// table writes aligned columns; the first row is the header.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		// A tab or newline inside a cell would break the alignment.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// flushPage flushes the table of one page and, when another page follows,
// tells on w (stderr: stdout stays the table) which flag continues it.
func (t *table) flushPage(w io.Writer, flag, next string) error {
	if err := t.flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(w, "more: --%s %s\n", flag, next)
	}
	return nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// plural is "1 hit" or "n hits": the count with its noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
