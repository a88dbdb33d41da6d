package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestDocsCommands(t *testing.T) {
	const key = "cli-docs-key-0123456789"
	url := memoryTestServer(t, key+"=acme:admin")
	ctx := context.Background()
	conn := []string{"--server", url, "--api-key", key}
	run := func(args ...string) string {
		t.Helper()
		out, _, err := execute(t, ctx, append(args, conn...)...)
		if err != nil {
			t.Fatalf("memento %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	file := filepath.Join(t.TempDir(), "runbook.md")
	if err := os.WriteFile(file, []byte("Runbook: restart the payments worker when the queue backs up."), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run("docs", "put", "runbook", "--file", file, "--acl", "group:ops", "--source-uri", "git://ops/runbook.md", "--source-version", "abc123"); !strings.Contains(out, "created runbook version 1: 1 chunk,") {
		t.Fatalf("put: %s", out)
	}
	if out := run("docs", "retrieve", "payments queue", "--principal", "user:ann"); !strings.Contains(out, "0 hits") {
		t.Fatalf("ann outside ops: %s", out)
	}
	run("docs", "member", "ops", "user:ann")
	out := run("docs", "retrieve", "payments queue", "--principal", "user:ann", "--json")
	var snap struct {
		SnapshotID string `json:"snapshot_id"`
		Hits       []struct {
			ChunkID string `json:"chunk_id"`
		} `json:"hits"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil || len(snap.Hits) != 1 || snap.Hits[0].ChunkID != "runbook:p1:c0" {
		t.Fatalf("ann in ops: %v %s", err, out)
	}
	run("docs", "put", "runbook", "--content", "Runbook v2: page the payments on-call.", "--acl", "group:ops")
	if out := run("docs", "snapshot", snap.SnapshotID); !strings.Contains(out, "runbook:p1:c0") || !strings.Contains(out, "abc123") {
		t.Fatalf("old snapshot: %s", out)
	}
	run("docs", "member", "ops", "user:ann", "--rm")
	if out := run("docs", "retrieve", "payments", "--principal", "user:ann"); !strings.Contains(out, "0 hits") {
		t.Fatalf("ann removed from ops: %s", out)
	}
	if out := run("docs", "rm", "runbook"); !strings.Contains(out, "deleted runbook") {
		t.Fatalf("rm: %s", out)
	}
	out = run("docs", "invalidations")
	for _, kind := range []string{"membership_changed", "document_replaced", "document_deleted"} {
		if !strings.Contains(out, kind) {
			t.Fatalf("invalidations lack %s:\n%s", kind, out)
		}
	}
	// VERSIONS is the document version left and the one moved to; a
	// membership change concerns no document (it showed "0→0").
	for _, line := range []string{
		`(?m)^\d+\s+membership_changed\s+-\s+-\s+ops\s+user:ann added\s`,
		`(?m)^\d+\s+document_replaced\s+runbook\s+1→2\s+-\s+-\s`,
		`(?m)^\d+\s+document_deleted\s+runbook\s+2→deleted\s+-\s+-\s`,
	} {
		if !regexp.MustCompile(line).MatchString(out) {
			t.Fatalf("invalidations lack a line matching %s:\n%s", line, out)
		}
	}
	if _, _, err := execute(t, ctx, append([]string{"docs", "rm", "runbook"}, conn...)...); err == nil || !strings.Contains(err.Error(), "document-not-found") {
		t.Fatalf("second rm: %v", err)
	}
}
