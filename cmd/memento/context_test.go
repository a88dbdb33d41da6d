package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestContextBuildCommand(t *testing.T) {
	const key = "cli-context-key-0123456789"
	url := memoryTestServer(t, key+"=acme:admin")
	ctx := context.Background()
	conn := []string{"--server", url, "--api-key", key}
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := execute(t, ctx, append(args, conn...)...)
		return out, err
	}
	if out, err := run("memory", "add", "--subject", "u1", "--key", "dislikes", "--value", "mugs", "--source-id", "msg-1"); err != nil {
		t.Fatalf("memory add: %v\n%s", err, out)
	}
	out, err := run("context", "build", "--budget", "300", "--system", "You are GiftGenius.", "--query", "a gift idea?", "--subject", "u1", "--messages")
	if err != nil {
		t.Fatalf("context build: %v\n%s", err, out)
	}
	for _, want := range []string{"tokens (reserve 0), o200k_base, exact", "system", "profile", "memory:", "--- system\nYou are GiftGenius.", "dislikes: mugs"} {
		if !strings.Contains(out, want) {
			t.Fatalf("context build output lacks %q:\n%s", want, out)
		}
	}
	out, err = run("context", "build", "--budget", "300", "--query", "x", "--subject", "u1", "--json")
	var res struct {
		Accounting struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"accounting"`
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Accounting.TotalTokens == 0 || res.Accounting.TotalTokens > 300 {
		t.Fatalf("context build --json: %v\n%s", err, out)
	}
	if out, err := run("context", "build", "--budget", "5", "--system", strings.Repeat("long system ", 20)); err == nil || !strings.Contains(out+err.Error(), "budget") {
		t.Fatalf("a budget too small must fail: %v\n%s", err, out)
	}
	if _, _, err := execute(t, ctx, "context", "nope"); err == nil {
		t.Fatal("an unknown subcommand must fail")
	}
}
