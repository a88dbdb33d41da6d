package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/internal/mdcode"
	"github.com/mementohq/memento/server"
)

const mcpGuide = "../../docs/clients/mcp.md"

// guideConfig is an MCP client config as the guide shows it: Claude
// Desktop's and Cursor's mcpServers, VS Code's servers and inputs. Unknown
// members fail the test, so a misspelt field cannot hide in the guide.
type guideConfig struct {
	Inputs []struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		Description string `json:"description"`
		Password    bool   `json:"password"`
	} `json:"inputs"`
	Servers    map[string]guideServer `json:"servers"`
	MCPServers map[string]guideServer `json:"mcpServers"`
}

type guideServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

var (
	guideToolRow   = regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	guideAPIKeys   = regexp.MustCompile(`--api-keys '([^']+)'`)
	guideMCPLine   = regexp.MustCompile("(?m)\\bmemento mcp( [^\\n\\\\`]*)?$")
	guidePlaceheld = regexp.MustCompile(`\$\{(input:[^}]+|env:[^}]+|[A-Za-z_][A-Za-z0-9_]*)\}`)
)

// TestMCPGuide checks docs/clients/mcp.md against the binary: its tool table
// names exactly the tools Memento serves; every JSON config block parses,
// each stdio entry starts `memento mcp` with its arguments (on a temporary
// data directory) and acts as its --user, each HTTP entry connects to a
// `memento serve` with its headers (placeholders filled with the guide's
// user-bound key; Authorization means the server with the guide's
// --api-keys) and acts as the user it names; every `memento mcp` command
// line of the guide parses; and the binding rules it states hold.
func TestMCPGuide(t *testing.T) {
	raw, err := os.ReadFile(mcpGuide)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	var tools []string
	for _, m := range guideToolRow.FindAllStringSubmatch(doc, -1) {
		tools = append(tools, m[1])
	}
	slices.Sort(tools)
	spec := guideAPIKeys.FindStringSubmatch(doc)
	if len(tools) < 10 || spec == nil {
		t.Fatalf("%s: want its tool table and a memento serve --api-keys '...' line; found %d tools, keys %v", mcpGuide, len(tools), spec)
	}
	keys := server.NewKeySet()
	if err := server.ParseAPIKeys(keys, spec[1]); err != nil {
		t.Fatalf("%s: --api-keys: %v", mcpGuide, err)
	}
	var userKey, tenantKey string
	for _, item := range strings.Split(spec[1], ",") {
		key := item[:strings.LastIndex(item, "=")]
		if p, _ := keys.Lookup(key); p.User != "" && userKey == "" {
			userKey = key
		} else if p.User == "" && tenantKey == "" {
			tenantKey = key
		}
	}
	if userKey == "" || tenantKey == "" {
		t.Fatalf("%s: the --api-keys example needs a user-bound and a tenant-wide key: %s", mcpGuide, spec[1])
	}

	bin := filepath.Join(t.TempDir(), "memento")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	plainAddr, _, stopPlain := startServe(t, "--data", t.TempDir())
	defer stopPlain()
	keyedAddr, _, stopKeyed := startServe(t, "--data", t.TempDir(), "--api-keys", spec[1])
	defer stopKeyed()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// check lists the connection's tools against the table and puts a
	// session: the answer names the user the connection acts as.
	check := func(t *testing.T, cs *gomcp.ClientSession, wantUser string) {
		t.Helper()
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		var served []string
		for _, tool := range list.Tools {
			served = append(served, tool.Name)
		}
		slices.Sort(served)
		if !slices.Equal(served, tools) {
			t.Errorf("the guide's tool table names %v; the server serves %v", tools, served)
		}
		out, isErr := guideCall(t, ctx, cs, "session_put", map[string]any{"session_id": "guide", "state": map[string]any{"step": "one"}})
		if isErr || out["user_id"] != wantUser {
			t.Errorf("session_put acts as %v (tool error %v: %v), want user %s", out["user_id"], isErr, out, wantUser)
		}
	}

	var stdio, remote int
	for _, b := range mdcode.Lang(mdcode.Blocks(doc), "json") {
		var cfg guideConfig
		dec := json.NewDecoder(strings.NewReader(b.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			t.Errorf("%s:%d: not a client config: %v", mcpGuide, b.Line, err)
			continue
		}
		entries := cfg.MCPServers
		if len(cfg.Servers) > 0 {
			entries = cfg.Servers
		}
		if len(entries) == 0 || (len(cfg.Servers) > 0 && len(cfg.MCPServers) > 0) {
			t.Errorf("%s:%d: want servers or mcpServers", mcpGuide, b.Line)
			continue
		}
		inputs := map[string]bool{}
		for _, in := range cfg.Inputs {
			inputs["input:"+in.ID] = true
		}
		for name, e := range entries {
			t.Run(strings.TrimSuffix(filepath.Base(mcpGuide), ".md")+":"+strconv.Itoa(b.Line)+":"+name, func(t *testing.T) {
				switch {
				case e.Command != "" && e.URL == "" && (e.Type == "" || e.Type == "stdio"):
					stdio++
					if filepath.Base(e.Command) != "memento" || len(e.Args) == 0 || e.Args[0] != "mcp" {
						t.Fatalf("a stdio entry runs memento mcp; this one runs %s %v", e.Command, e.Args)
					}
					args := slices.Clone(e.Args)
					user := ""
					for i := 1; i+1 < len(args); i++ {
						switch args[i] {
						case "--data":
							args[i+1] = t.TempDir()
						case "--user":
							user = args[i+1]
						}
					}
					if user == "" {
						t.Fatalf("a stdio entry names its user (--user): %v", args)
					}
					cmd := exec.CommandContext(ctx, bin, append(args, "--log-level", "warn")...)
					cmd.Env = os.Environ()
					for k, v := range e.Env {
						cmd.Env = append(cmd.Env, k+"="+v)
					}
					cmd.Stderr = os.Stderr
					cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "guide", Version: "1"}, nil).Connect(ctx, &gomcp.CommandTransport{Command: cmd}, nil)
					if err != nil {
						t.Fatalf("start memento %v: %v", args, err)
					}
					defer cs.Close()
					check(t, cs, user)
				case e.URL != "" && e.Command == "" && (e.Type == "" || e.Type == "http"):
					remote++
					u, err := url.Parse(e.URL)
					if err != nil || u.Path != "/mcp" || (u.Scheme != "http" && u.Scheme != "https") {
						t.Fatalf("url %q: want an http(s) URL of /mcp (%v)", e.URL, err)
					}
					h := http.Header{}
					for k, v := range e.Headers {
						for _, m := range guidePlaceheld.FindAllStringSubmatch(v, -1) {
							if strings.HasPrefix(m[1], "input:") && !inputs[m[1]] {
								t.Errorf("header %s uses ${%s}, which the config's inputs do not declare", k, m[1])
							}
						}
						h.Set(k, guidePlaceheld.ReplaceAllString(v, userKey))
					}
					addr, user := plainAddr, h.Get(server.HeaderUser)
					if auth := h.Get("Authorization"); auth != "" {
						addr = keyedAddr
						p, ok := keys.Lookup(strings.TrimPrefix(auth, "Bearer "))
						if !ok {
							t.Fatalf("Authorization %q names none of the guide's keys", auth)
						}
						if user == "" {
							user = p.User
						}
					}
					if user == "" {
						t.Fatalf("an HTTP entry names its user (%s or a user-bound key): %v", server.HeaderUser, e.Headers)
					}
					cs, err := guideConnect(ctx, "http://"+addr+"/mcp", h)
					if err != nil {
						t.Fatalf("connect with %v: %v", h, err)
					}
					defer cs.Close()
					check(t, cs, user)
				default:
					t.Fatalf("an entry is either stdio (command, args) or http (url, headers): %+v", e)
				}
			})
		}
	}
	if stdio == 0 || remote == 0 {
		t.Errorf("%s: %d stdio and %d HTTP configs; the guide lost its client configs", mcpGuide, stdio, remote)
	}

	// Every `memento mcp ...` command line of the guide parses (--help
	// after the arguments parses them and starts nothing).
	lines := guideMCPLine.FindAllStringSubmatch(doc, -1)
	if len(lines) < 2 {
		t.Errorf("%s: %d memento mcp command lines; the guide lost its commands", mcpGuide, len(lines))
	}
	for _, m := range lines {
		args := append([]string{"mcp"}, strings.Fields(m[1])...)
		if out, err := exec.CommandContext(ctx, bin, append(args, "--help")...).CombinedOutput(); err != nil {
			t.Errorf("%s: memento %s: %v\n%s", mcpGuide, strings.Join(args, " "), err, out)
		}
	}

	// The binding rules the guide states.
	t.Run("binding", func(t *testing.T) {
		tenantWide, err := guideConnect(ctx, "http://"+keyedAddr+"/mcp", http.Header{"Authorization": {"Bearer " + tenantKey}})
		if err != nil {
			t.Fatal(err)
		}
		defer tenantWide.Close()
		if out, isErr := guideCall(t, ctx, tenantWide, "session_get", map[string]any{"session_id": "guide"}); !isErr || !strings.Contains(fmt.Sprint(out), "unauthorized") {
			t.Errorf("a tenant-wide key without %s: %v, want an unauthorized tool error", server.HeaderUser, out)
		}
		if cs, err := guideConnect(ctx, "http://"+keyedAddr+"/mcp", http.Header{"Authorization": {"Bearer " + userKey}, server.HeaderUser: {"someone-else"}}); err == nil {
			cs.Close()
			t.Errorf("a user-bound key with %s naming another user connected", server.HeaderUser)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+keyedAddr+"/v1/runs", nil)
		req.Header.Set("Authorization", "Bearer "+userKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("a user-bound key on /v1: %d, want 403", res.StatusCode)
		}
	})
}

// guideHeaders sets the config's headers on every request, as the client would.
type guideHeaders http.Header

func (h guideHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func guideConnect(ctx context.Context, endpoint string, h http.Header) (*gomcp.ClientSession, error) {
	tr := &gomcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: guideHeaders(h)}, MaxRetries: -1, DisableStandaloneSSE: true}
	return gomcp.NewClient(&gomcp.Implementation{Name: "guide", Version: "1"}, nil).Connect(ctx, tr, nil)
}

// guideCall calls a tool and returns its JSON text and whether it is a tool error.
func guideCall(t *testing.T, ctx context.Context, cs *gomcp.ClientSession, name string, args any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*gomcp.TextContent).Text), &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out, res.IsError
}
