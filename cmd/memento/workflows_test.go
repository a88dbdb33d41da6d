package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/run"
)

func TestWorkflowsSchemasCommands(t *testing.T) {
	url := testServer(t, "")
	ctx := context.Background()
	conn := []string{"--server", url}
	const schema = `{"type":"object","required":["amount"],"properties":{"amount":{"type":"integer"}}}`
	file := filepath.Join(t.TempDir(), "v1.json")
	if err := os.WriteFile(file, []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}

	out, _, err := execute(t, ctx, append([]string{"workflows", "schemas", "put", "refund", "1", file}, conn...)...)
	if err != nil || !strings.Contains(out, "refund v1 registered: sha256:") {
		t.Fatalf("put: %v\n%s", err, out)
	}
	out, _, err = execute(t, ctx, append([]string{"workflows", "schemas", "put", "refund", "1", file}, conn...)...)
	if err != nil || !strings.Contains(out, "already registered (unchanged)") {
		t.Fatalf("put again: %v\n%s", err, out)
	}
	// From stdin: another schema for v1 is refused, v2 is registered.
	root := newRootCmd()
	root.SetIn(strings.NewReader(`{"type":"object"}`))
	root.SetArgs(append([]string{"workflows", "schemas", "put", "refund", "1", "-"}, conn...))
	root.SetOut(new(strings.Builder))
	root.SetErr(new(strings.Builder))
	if err := root.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "registered") {
		t.Fatalf("put a different schema for v1: %v", err)
	}
	root = newRootCmd()
	root.SetIn(strings.NewReader(`{"type":"object"}`))
	var stdout strings.Builder
	root.SetOut(&stdout)
	root.SetArgs(append([]string{"workflows", "schemas", "put", "refund", "2", "-"}, conn...))
	if err := root.ExecuteContext(ctx); err != nil || !strings.Contains(stdout.String(), "refund v2 registered") {
		t.Fatalf("put v2 from stdin: %v\n%s", err, stdout.String())
	}

	out, _, err = execute(t, ctx, append([]string{"workflows", "schemas", "get", "refund", "1"}, conn...)...)
	var got map[string]any
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["required"] == nil {
		t.Fatalf("get: %v\n%s", err, out)
	}
	if _, _, err = execute(t, ctx, append([]string{"workflows", "schemas", "get", "refund", "9"}, conn...)...); err == nil {
		t.Fatal("get of an unregistered version succeeded")
	}
	out, _, err = execute(t, ctx, append([]string{"workflows", "schemas", "list", "refund"}, conn...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || !strings.HasPrefix(lines[0], "VERSION") || !strings.HasPrefix(lines[1], "1 ") || !strings.HasPrefix(lines[2], "2 ") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, errOut, err := execute(t, ctx, append([]string{"workflows", "schemas", "list", "refund", "--limit", "1", "--json"}, conn...)...)
	var page client.Page[run.Schema]
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 1 || page.NextCursor == "" {
		t.Fatalf("list --json: %v\n%s%s", err, out, errOut)
	}
	for _, bad := range [][]string{{"put", "refund", "0", file}, {"put", "refund", "1", filepath.Join(t.TempDir(), "missing.json")}, {"get", "refund"}} {
		if _, _, err := execute(t, ctx, append(append([]string{"workflows", "schemas"}, bad...), conn...)...); err == nil {
			t.Fatalf("workflows schemas %v succeeded", bad)
		}
	}
}
