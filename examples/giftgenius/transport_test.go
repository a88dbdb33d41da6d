package giftgenius_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/examples/giftgenius"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/server"
)

type connectFunc = func(context.Context) (agent.Tools, func() error, error)

// wantTools are the tools the scenario uses, listed by the server.
var wantTools = []string{"session_get", "session_put", "session_patch", "message_append", "messages_list", "memory_get", "memory_add",
	"context_build", "run_start", "run_get", "run_checkpoint", "run_restore"}

// scenario is the whole GiftGenius scenario over connections connect
// opens: the first visit on one connection, the second on another with a
// new device session, restored from the run's last checkpoint; the stored
// profile is read back over the tools.
func scenario(t *testing.T, connect connectFunc) {
	t.Helper()
	cat, err := giftgenius.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	// One connection at a time: over stdio each is a process on the
	// same data directory, as devices come and go.
	first, closeFirst := open(t, connect)
	listed, err := first.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range wantTools {
		if !slices.ContainsFunc(listed, func(tl llm.Tool) bool { return tl.Name == n }) {
			t.Fatalf("tool %s not listed", n)
		}
	}
	chosen := visit1(t, cat, giftgenius.Config{Memento: first})
	closeFirst()

	// Another device: a new connection and a new session.
	second, closeSecond := open(t, connect)
	defer closeSecond()
	a, err := giftgenius.New(giftgenius.Config{Memento: second, SessionID: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	r := turn(t, a, giftgenius.Visit2[0])
	if r.RestoredFrom != "final-choice" {
		t.Fatalf("restored from %q, want final-choice", r.RestoredFrom)
	}
	if q := giftgenius.QuestionsAbout(r.Answer); len(q) != 0 || !slices.Contains(modelCalls(r), "memory_get") {
		t.Fatalf("visit 2 asked about %v (calls %v): %q", q, modelCalls(r), r.Answer)
	}
	for _, p := range options(t, cat, r.Answer) {
		if p.ID == chosen || p.PriceEUR > 120 {
			t.Fatalf("visit 2 option %+v: last time's choice %s or over 120", p, chosen)
		}
	}
	idsOnly(t, r.State, cat)
	out, kind := callJSON(t, second, "memory_get", map[string]any{"namespace": giftgenius.Namespace, "key": "anna"})
	if kind != "" {
		t.Fatalf("memory_get: %s", kind)
	}
	var got struct {
		Memories []struct {
			Value      giftgenius.Profile `json:"value"`
			Supersedes string             `json:"supersedes"`
			Provenance struct {
				SourceID   string   `json:"source_id"`
				MessageIDs []string `json:"message_ids"`
			} `json:"provenance"`
		} `json:"memories"`
	}
	b, _ := json.Marshal(out)
	_ = json.Unmarshal(b, &got)
	if len(got.Memories) != 1 || got.Memories[0].Value.BudgetEUR != 120 || got.Memories[0].Supersedes == "" ||
		got.Memories[0].Provenance.SourceID != "session:laptop" || !slices.Equal(got.Memories[0].Provenance.MessageIDs, []string{"1"}) {
		t.Fatalf("stored profile after visit 2: %s", b)
	}
}

// otherUser checks that another user's agent on the same server neither
// restores nor reads this user's work.
func otherUser(t *testing.T, connect connectFunc) {
	t.Helper()
	bob, closeBob := open(t, connect)
	defer closeBob()
	if _, kind := callJSON(t, bob, "session_get", map[string]any{"session_id": "laptop"}); kind != "session-not-found" {
		t.Fatalf("bob reads alice's session: %q", kind)
	}
	if _, kind := callJSON(t, bob, "messages_list", map[string]any{"session_id": "phone"}); kind != "session-not-found" {
		t.Fatalf("bob lists alice's messages: %q", kind)
	}
	if _, kind := callJSON(t, bob, "run_restore", map[string]any{"run": giftgenius.DefaultRun, "label": "final-choice"}); !strings.HasSuffix(kind, "not-found") {
		t.Fatalf("bob restores alice's run: %q", kind)
	}
	if out, _ := callJSON(t, bob, "memory_get", map[string]any{"namespace": giftgenius.Namespace}); len(out["memories"].([]any)) != 0 {
		t.Fatalf("bob reads alice's profiles: %v", out)
	}
	if out, _ := callJSON(t, bob, "memory_search", map[string]any{"query": "Anna hiking coffee"}); len(out["hits"].([]any)) != 0 {
		t.Fatalf("bob finds alice's profiles: %v", out)
	}
	a, err := giftgenius.New(giftgenius.Config{Memento: bob, SessionID: "bob-laptop"})
	if err != nil {
		t.Fatal(err)
	}
	r := turn(t, a, giftgenius.Visit2[0])
	if r.RestoredFrom != "" {
		t.Fatalf("bob's session restored from %q", r.RestoredFrom)
	}
	// Knowing nothing of Anna, bob's agent has to ask: who, what, where.
	q := giftgenius.QuestionsAbout(r.Answer)
	for _, f := range []string{giftgenius.FieldRecipient, giftgenius.FieldInterests, giftgenius.FieldRegion} {
		if !slices.Contains(q, f) {
			t.Fatalf("bob's agent did not ask about %s (asked %v): %q", f, q, r.Answer)
		}
	}
	if s := state(t, r); s.Profile == nil || s.Profile.BudgetEUR != 120 || s.Profile.Recipient != "" || s.ChoiceID != "" {
		t.Fatalf("bob's state %s", r.State)
	}
}

// TestOverStreamableHTTP runs the scenario with SDK clients over
// streamable HTTP on `memento serve`'s handler, each user with their own
// user-bound key, and checks another user on the same server sees nothing.
func TestOverStreamableHTTP(t *testing.T) {
	eng := openEngine(t, nil)
	ks := server.NewKeySet()
	const aliceKey, bobKey = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"
	if err := server.ParseAPIKeys(ks, aliceKey+"=acme:writer:alice,"+bobKey+"=acme:writer:bob"); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory,
		Context: eng.Context, Retrieval: eng.Retrieval, Keys: ks, MCP: mcpServer(eng), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	connect := func(key string) connectFunc {
		return func(ctx context.Context) (agent.Tools, func() error, error) {
			tr := &gomcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
				HTTPClient: &http.Client{Transport: bearerRT(key)}}
			cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "giftgenius-test", Version: "1"}, nil).Connect(ctx, tr, nil)
			if err != nil {
				return nil, nil, err
			}
			return agent.NewMCP(cs), cs.Close, nil
		}
	}
	scenario(t, connect(aliceKey))
	otherUser(t, connect(bobKey))
}

// open is a connection and its idempotent close.
func open(t *testing.T, connect connectFunc) (agent.Tools, func()) {
	t.Helper()
	tools, closeFn, err := connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	done := func() { once.Do(func() { _ = closeFn() }) }
	t.Cleanup(done)
	return tools, done
}

type bearerRT string

func (k bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

// TestOverStdio runs the scenario against `memento mcp` processes, as an
// MCP client config starts them: each visit is another process on the same
// data directory, and another user's process sees nothing of it.
func TestOverStdio(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "memento")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mementohq/memento/cmd/memento").CombinedOutput(); err != nil {
		t.Fatalf("build memento: %v\n%s", err, out)
	}
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	connect := func(user string) connectFunc {
		return func(context.Context) (agent.Tools, func() error, error) {
			cmd := exec.CommandContext(ctx, bin, "mcp", "--data", data, "--tenant", "acme", "--user", user, "--log-level", "warn")
			cmd.Stderr = os.Stderr
			cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "giftgenius-test", Version: "1"}, nil).Connect(ctx, &gomcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				return nil, nil, err
			}
			return agent.NewMCP(cs), cs.Close, nil
		}
	}
	scenario(t, connect("alice"))
	otherUser(t, connect("bob"))
}
