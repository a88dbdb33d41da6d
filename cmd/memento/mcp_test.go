package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPStdio starts `memento mcp` as a real process, as an MCP client
// config would, and uses its tools over stdin/stdout; a second process on
// the same data directory, bound to another user, cannot read the first
// user's session.
func TestMCPStdio(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "memento")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func(user string) *gomcp.ClientSession {
		cmd := exec.CommandContext(ctx, bin, "mcp", "--data", data, "--user", user, "--log-level", "warn")
		cmd.Stderr = os.Stderr
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &gomcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect to memento mcp --user %s: %v", user, err)
		}
		return cs
	}
	call := func(cs *gomcp.ClientSession, name string, args any) (map[string]any, bool) {
		return guideCall(t, ctx, cs, name, args)
	}
	alice := connect("alice")
	tools, err := alice.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 10 {
		t.Fatalf("tools over stdio: %v %v", tools, err)
	}
	if out, isErr := call(alice, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"step": "one"}}); isErr || out["user_id"] != "alice" {
		t.Fatalf("put: %v", out)
	}
	if err := alice.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	bob := connect("bob")
	defer bob.Close()
	if out, isErr := call(bob, "session_get", map[string]any{"session_id": "s1"}); !isErr {
		t.Fatalf("bob read alice's session over stdio: %v", out)
	}
	again := connect("alice")
	defer again.Close()
	if out, isErr := call(again, "session_get", map[string]any{"session_id": "s1"}); isErr || out["state"].(map[string]any)["step"] != "one" {
		t.Fatalf("alice's session across processes: %v", out)
	}
}
