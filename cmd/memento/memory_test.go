package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/server"
)

// likesExtractor stands in for a model: "I like X" is a statement; any
// other message is skipped.
type likesExtractor struct{}

func (likesExtractor) Name() string { return "cli-test@1" }

func (likesExtractor) Extract(_ context.Context, msgs []memory.Message) (memory.Extraction, error) {
	var ex memory.Extraction
	for _, m := range msgs {
		if v, ok := strings.CutPrefix(m.Content, "I like "); ok && m.Role == "user" {
			b, _ := json.Marshal(v)
			ex.Candidates = append(ex.Candidates, memory.Candidate{Key: "likes", Value: b, Kind: "statement", ValidatedBy: memory.ValidatedUserStated, MessageIDs: []string{m.ID}})
			continue
		}
		ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID, Reason: "no explicit statement"})
	}
	return ex, nil
}

// memoryTestServer serves a real engine on embedded SQLite, as serve opens
// it but with a test extractor, and returns its URL.
func memoryTestServer(t *testing.T, keys string) string {
	t.Helper()
	eng, err := memento.Open(context.Background(), memento.Config{DataDir: t.TempDir(), Memory: memory.Options{Extractor: likesExtractor{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	ks := server.NewKeySet()
	if err := server.ParseAPIKeys(ks, keys); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory, Retrieval: eng.Retrieval, Context: eng.Context,
		Ready: eng.Ready, Keys: ks, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestMemoryCommands(t *testing.T) {
	const key = "cli-memory-key-0123456789"
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

	out := run("memory", "add", "--subject", "u1", "--key", "home", "--value", "Moscow", "--source-id", "msg-1", "--json")
	var first struct {
		MemoryID string `json:"memory_id"`
		Outcome  string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &first); err != nil || first.Outcome != "added" || first.MemoryID == "" {
		t.Fatalf("add --json: %v\n%s", err, out)
	}
	out = run("memory", "add", "--subject", "u1", "--key", "home", "--value", "Saint Petersburg", "--source-id", "msg-2")
	if !regexp.MustCompile(`(?m)^superseded \S+: home = Saint Petersburg$`).MatchString(out) || !strings.Contains(out, "supersedes "+first.MemoryID) {
		t.Fatalf("add (supersede):\n%s", out)
	}
	out = run("memory", "add", "--subject", "u1", "--key", "home", "--value", "saint petersburg", "--source-id", "msg-3")
	if !strings.HasPrefix(out, "merged ") || !strings.Contains(out, "seen 2 times") {
		t.Fatalf("add (duplicate):\n%s", out)
	}
	run("memory", "add", "--subject", "u1", "--key", "age", "--value", "42", "--source-id", "msg-4")

	out = run("memory", "ls", "--subject", "u1")
	if !regexp.MustCompile(`(?m)^\S+\s+default\s+home\s+Saint Petersburg\s+current\s+user:msg-2\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)\sage\s+42\s`).MatchString(out) || strings.Contains(out, "Moscow") {
		t.Fatalf("ls:\n%s", out)
	}
	out = run("memory", "history", first.MemoryID)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.Contains(lines[1], "superseded") || !strings.Contains(lines[1], "user:msg-1") ||
		!strings.Contains(lines[2], "current") || !strings.Contains(lines[2], "user:msg-2") {
		t.Fatalf("history:\n%s", out)
	}
	// With the offline hashing embedder a search runs full text unless told otherwise.
	out = run("memory", "search", "petersburg", "--subject", "u1")
	if !strings.Contains(out, "Saint Petersburg") || !strings.Contains(out, "mode fulltext, 1 hit\n") {
		t.Fatalf("search:\n%s", out)
	}
	out = run("memory", "search", "petersburg", "--subject", "u1", "--mode", "hybrid")
	if !strings.Contains(out, "Saint Petersburg") || !strings.Contains(out, "mode hybrid, 1 hit\n") {
		t.Fatalf("search --mode hybrid:\n%s", out)
	}

	// Extraction accounts for every message; a dry run writes nothing.
	msgs := filepath.Join(t.TempDir(), "msgs.json")
	if err := os.WriteFile(msgs, []byte(`[{"id":"a","role":"user","content":"I like jazz"},{"id":"b","role":"assistant","content":"ok"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = run("memory", "extract", "--subject", "u1", "--file", msgs)
	if !regexp.MustCompile(`(?m)^added\s+likes\s+jazz\s+-\s+\[a\]`).MatchString(out) || !strings.Contains(out, "skipped b: no explicit statement") || !strings.Contains(out, "dry run") {
		t.Fatalf("extract (dry run):\n%s", out)
	}
	out = run("memory", "extract", "--subject", "u1", "--message", "I like tea", "--apply", "--json")
	var ex struct {
		Items []struct {
			Outcome  string `json:"outcome"`
			MemoryID string `json:"memory_id"`
		} `json:"items"`
		Applied bool `json:"applied"`
	}
	if err := json.Unmarshal([]byte(out), &ex); err != nil || !ex.Applied || len(ex.Items) != 1 || ex.Items[0].MemoryID == "" {
		t.Fatalf("extract --apply: %v\n%s", err, out)
	}

	// Held claims, confirm and reject.
	out = run("memory", "add", "--subject", "u1", "--key", "condition", "--value", "asthma", "--category", "health", "--source-id", "msg-5", "--json")
	var held struct {
		MemoryID string `json:"memory_id"`
		Outcome  string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &held); err != nil || held.Outcome != "held" {
		t.Fatalf("held add: %v\n%s", err, out)
	}
	out = run("memory", "add", "--subject", "u1", "--key", "faith", "--value", "none", "--category", "religion", "--source-id", "msg-6", "--json")
	var held2 struct {
		MemoryID string `json:"memory_id"`
	}
	_ = json.Unmarshal([]byte(out), &held2)
	if out := run("memory", "held", "--subject", "u1"); !strings.Contains(out, held.MemoryID) || !strings.Contains(out, held2.MemoryID) {
		t.Fatalf("held:\n%s", out)
	}
	if out := run("memory", "confirm", held.MemoryID); !strings.HasPrefix(out, "added "+held.MemoryID) {
		t.Fatalf("confirm:\n%s", out)
	}
	if out := run("memory", "reject", held2.MemoryID, "--reason", "not asked"); !strings.HasPrefix(out, "rejected "+held2.MemoryID) {
		t.Fatalf("reject:\n%s", out)
	}
	out = run("memory", "profile", "u1")
	if !strings.Contains(out, "u1: 4 claims") || !strings.Contains(out, "home: Saint Petersburg") || !strings.Contains(out, "condition: asthma") {
		t.Fatalf("profile:\n%s", out)
	}

	// Namespaces and consent.
	if out := run("memory", "namespace", "private", "--personal"); !regexp.MustCompile(`(?m)^private\s+true\s+false\s+0s$`).MatchString(out) {
		t.Fatalf("namespace:\n%s", out)
	}
	_, _, err := execute(t, ctx, append([]string{"memory", "add", "--subject", "u1", "--namespace", "private", "--key", "diet", "--value", "vegan", "--source-id", "m"}, conn...)...)
	if err == nil || !strings.Contains(err.Error(), "memory-consent-required") {
		t.Fatalf("personal without consent: %v", err)
	}
	run("memory", "add", "--subject", "u1", "--namespace", "private", "--key", "diet", "--value", "vegan", "--source-id", "m", "--consent", "opted in")

	// Forget: nothing is found afterwards and the claim cannot come back.
	if out := run("memory", "profile", "--subject", "u1"); !strings.Contains(out, "u1: ") {
		t.Fatalf("profile --subject:\n%s", out)
	}
	out = run("memory", "forget", "--subject", "u1", "--reason", "erasure")
	if !regexp.MustCompile(`^forgot 7 claims of u1 in every namespace`).MatchString(out) {
		t.Fatalf("forget:\n%s", out)
	}
	if out := run("memory", "search", "petersburg jazz tea", "--subject", "u1"); !strings.Contains(out, "0 hits") {
		t.Fatalf("search after forget:\n%s", out)
	}
	_, _, err = execute(t, ctx, append([]string{"memory", "add", "--subject", "u1", "--key", "home", "--value", "Saint Petersburg", "--source-id", "msg-2"}, conn...)...)
	if err == nil || !strings.Contains(err.Error(), "memory-forgotten") {
		t.Fatalf("re-add after forget: %v", err)
	}

	// Mistakes exit non-zero.
	for _, args := range [][]string{
		{"memory", "get", "x"},
		{"memory", "ls"},
		{"memory", "add", "--subject", "u1", "--key", "k"},
		{"memory", "extract", "--subject", "u1"},
		{"memory", "history"},
		{"memory", "profile"},
		{"memory", "forget"},
		{"memory", "forget", "u1", "--subject", "u2"},
	} {
		if _, _, err := execute(t, ctx, append(args, conn...)...); err == nil {
			t.Errorf("memento %s succeeded", strings.Join(args, " "))
		}
	}
}

// An empty --namespace is refused before anything is sent: leaving the flag
// out is how every namespace is forgotten.
func TestMemoryForgetEmptyNamespace(t *testing.T) {
	_, _, err := execute(t, context.Background(), "memory", "forget", "u1", "--namespace", "", "--server", "http://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "--namespace is empty") {
		t.Fatalf("forget --namespace \"\": %v", err)
	}
}
