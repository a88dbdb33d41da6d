package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/session"
)

func TestSessionsCommands(t *testing.T) {
	const key = "cli-test-key-0123456789"
	url := testServer(t, key+"=acme")
	ctx := context.Background()
	c, _ := client.New(url, client.WithAPIKey(key))
	conn := []string{"--server", url, "--api-key", key}
	for _, id := range []string{"s-1", "s-2"} {
		if _, _, err := c.PutSession(ctx, id, client.PutSessionRequest{UserID: "u", State: json.RawMessage(`{"current_step":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AppendMessages(ctx, "s-1", "u", session.MessageInput{Role: "user", Content: "hello there"}); err != nil {
		t.Fatal(err)
	}
	out, _, err := execute(t, ctx, append([]string{"sessions", "ls", "--user", "u"}, conn...)...)
	if err != nil || !regexp.MustCompile(`(?m)^s-1\s+-\s+1\s+1\s`).MatchString(out) || !strings.Contains(out, "s-2") {
		t.Fatalf("sessions ls: %v\n%s", err, out)
	}
	if _, _, err := execute(t, ctx, append([]string{"sessions", "ls"}, conn...)...); err == nil || !strings.Contains(err.Error(), "--user") {
		t.Fatalf("ls without --user: %v", err)
	}
	out, _, err = execute(t, ctx, append([]string{"sessions", "show", "s-1", "--user", "u"}, conn...)...)
	if err != nil || !strings.Contains(out, `"current_step": "s-1"`) || !regexp.MustCompile(`(?m)^1\s+user\s+\S+\s+hello there$`).MatchString(out) {
		t.Fatalf("sessions show: %v\n%s", err, out)
	}
	if _, _, err := execute(t, ctx, append([]string{"sessions", "show", "s-1", "--user", "other"}, conn...)...); err == nil || !strings.Contains(err.Error(), "session-not-found") {
		t.Fatalf("show as another user: %v", err)
	}
	out, _, err = execute(t, ctx, append([]string{"sessions", "rm", "s-1", "--user", "u", "--json"}, conn...)...)
	var closed session.Session
	if err != nil || json.Unmarshal([]byte(out), &closed) != nil || closed.SessionID != "s-1" || closed.MessageCount != 1 {
		t.Fatalf("sessions rm: %v\n%s", err, out)
	}
	out, _, err = execute(t, ctx, append([]string{"sessions", "ls", "--user", "u", "--json"}, conn...)...)
	var left client.Page[session.Session]
	if err != nil || json.Unmarshal([]byte(out), &left) != nil || len(left.Items) != 1 || left.Items[0].SessionID != "s-2" || left.NextCursor != "" {
		t.Fatalf("ls after rm: %v\n%s", err, out)
	}
	// A page that is not the last says so (it was cut silently), and the
	// cursor or --all reach the rest.
	if _, _, err := c.PutSession(ctx, "s-3", client.PutSessionRequest{UserID: "u", State: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execute(t, ctx, append([]string{"sessions", "ls", "--user", "u", "--limit", "1"}, conn...)...)
	next := regexp.MustCompile(`more: --cursor (\S+)`).FindStringSubmatch(errOut)
	if err != nil || next == nil || !strings.Contains(out, "s-3") || strings.Contains(out, "s-2") {
		t.Fatalf("first page of one: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err = execute(t, ctx, append([]string{"sessions", "ls", "--user", "u", "--limit", "1", "--cursor", next[1]}, conn...)...)
	if err != nil || !strings.Contains(out, "s-2") || strings.Contains(out, "s-3") {
		t.Fatalf("second page: %v\n%s", err, out)
	}
	out, _, err = execute(t, ctx, append([]string{"sessions", "ls", "--user", "u", "--limit", "1", "--all", "--json"}, conn...)...)
	var every client.Page[session.Session]
	if err != nil || json.Unmarshal([]byte(out), &every) != nil || len(every.Items) != 2 || every.NextCursor != "" {
		t.Fatalf("--all: %v\n%s", err, out)
	}
}

// TestServeRedisSessions: `serve --redis URL` keeps sessions in Redis.
func TestServeRedisSessions(t *testing.T) {
	rdb, redisURL := testenv.RedisClient(t)
	h := testenv.RandomID("")
	sid, user := "cli-"+h, "u-"+h
	tag := "memento:{t:default:s:" + sid + "}"
	index := "memento:{t:default:u:" + user + "}:ix"
	defer rdb.Del(context.Background(), tag, index)

	t.Setenv(envPIIKey, testenv.PIIKeyHex) // a shared backend needs a vault key
	addr, logs, stop := startServe(t, "--data", t.TempDir(), "--redis", redisURL)
	backend := ""
	for _, l := range logs {
		if l.Msg == "sessions" {
			backend = l.Backend
		}
	}
	if backend != "redis" {
		t.Fatalf("session backend logged as %q, want redis", backend)
	}
	ctx := t.Context()
	c, _ := client.New("http://" + addr)
	if _, _, err := c.PutSession(ctx, sid, client.PutSessionRequest{UserID: user, State: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatalf("put through serve: %v", err)
	}
	if st, err := rdb.HGet(ctx, tag, "st").Result(); err != nil || st != `{"a":1}` {
		t.Fatalf("the session is not in Redis: %q %v", st, err)
	}
	stop()
}

// TestServeSharedBackendNeedsKey: `serve --postgres` or `--redis` with
// redaction on and no MEMENTO_PII_KEY refuses to start and says how to
// make a key; with --pii-redaction=false it needs none.
func TestServeSharedBackendNeedsKey(t *testing.T) {
	t.Setenv(envPIIKey, "")
	for _, args := range [][]string{
		{"--postgres", testenv.PostgresURL(t)},
		{"--redis", testenv.RedisURL(t)},
	} {
		_, _, err := execute(t, t.Context(), append([]string{"serve", "--listen", "127.0.0.1:0", "--data", t.TempDir()}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") || !strings.Contains(err.Error(), envPIIKey) {
			t.Fatalf("serve %s without a key: %v; want a refusal saying how to make one", args[0], err)
		}
	}
	t.Setenv(envPIIKey, "not-hex")
	if _, _, err := execute(t, t.Context(), "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir()); err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Fatalf("serve with a malformed key: %v", err)
	}
	t.Setenv(envPIIKey, "")
	_, _, stop := startServe(t, "--data", t.TempDir(), "--postgres", testenv.PostgresURL(t), "--pii-redaction=false")
	stop()
}
