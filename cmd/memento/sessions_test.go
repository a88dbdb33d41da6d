package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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
	var left []session.Session
	if err != nil || json.Unmarshal([]byte(out), &left) != nil || len(left) != 1 || left[0].SessionID != "s-2" {
		t.Fatalf("ls after rm: %v\n%s", err, out)
	}
}

// TestServeRedisSessions: `serve --redis URL` keeps sessions in Redis.
func TestServeRedisSessions(t *testing.T) {
	redisURL := os.Getenv("MEMENTO_TEST_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	opts, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis is required and unreachable at %s (set MEMENTO_TEST_REDIS_URL): %v", redisURL, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	sid, user := "cli-"+hex.EncodeToString(b), "u-"+hex.EncodeToString(b)
	tag := "memento:{t:default:s:" + sid + "}"
	index := "memento:{t:default:u:" + user + "}:ix"
	defer rdb.Del(context.Background(), tag, index)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(pw)
	root.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--redis", redisURL, "--log-format", "json"})
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	addrc, backendc := make(chan string, 1), make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line struct {
				Msg     string `json:"msg"`
				Addr    string `json:"addr"`
				Backend string `json:"backend"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				switch line.Msg {
				case "listening":
					addrc <- line.Addr
				case "sessions":
					backendc <- line.Backend
				}
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("serve exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening within 30s")
	}
	if b := <-backendc; b != "redis" {
		t.Fatalf("session backend logged as %q, want redis", b)
	}
	c, _ := client.New("http://" + addr)
	if _, _, err := c.PutSession(ctx, sid, client.PutSessionRequest{UserID: user, State: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatalf("put through serve: %v", err)
	}
	if st, err := rdb.HGet(ctx, tag, "st").Result(); err != nil || st != `{"a":1}` {
		t.Fatalf("the session is not in Redis: %q %v", st, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s")
	}
	<-drained
}
