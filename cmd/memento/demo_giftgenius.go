package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/examples/giftgenius"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/llm/openai"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/server"
)

func newDemoGiftGeniusCmd() *cobra.Command {
	var data, modelURL, chatModel string
	var away time.Duration
	cmd := &cobra.Command{
		Use:   "giftgenius",
		Short: "Two visits of the GiftGenius agent, a week apart on two devices: nothing known is asked again",
		Long: `Run the GiftGenius example (examples/giftgenius) on an embedded engine: on a
first device the agent collects a recipient's profile over two turns, finds,
filters and records a gift; then the engine's clock moves a week (--away),
the first session expires, and the user comes back on a second device: "same
friend, bigger budget". The agent restores the work from the run's last
checkpoint and the stored profile, and must not ask again for what it knows.

The agent talks to Memento over MCP (in process). By default its model is the
scripted planner (offline, deterministic); --model-url points it at any
OpenAI-compatible endpoint instead (the key comes from ` + envModelAPIKey + `).
The data lives in a temporary directory unless --data names one. The exit
status is 0 only when the second visit was restored and asked nothing known.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if away < 0 {
				return fmt.Errorf("--away %s: the time away must not be negative", away)
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			dir := flagOrEnv(cmd, "data", data, envData, "")
			user, phone, laptop := "demo", "phone", "laptop"
			if dir == "" {
				tmp, err := os.MkdirTemp("", "memento-giftgenius-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			} else {
				// A data directory may hold earlier demos: each one is its
				// own user, with its own devices (session ids are per tenant).
				b := make([]byte, 4)
				_, _ = rand.Read(b)
				user = "demo-" + hex.EncodeToString(b)
				phone, laptop = user+"-phone", user+"-laptop"
			}
			var model llm.Chat
			name := ""
			if u := flagOrEnv(cmd, "model-url", modelURL, envModelURL, ""); u != "" {
				cl, err := openai.New(openai.Config{BaseURL: u, APIKey: os.Getenv(envModelAPIKey), Timeout: 60 * time.Second})
				if err != nil {
					return fmt.Errorf("model server %s: %w", u, err)
				}
				name = flagOrEnv(cmd, "chat-model", chatModel, envChatModel, chatModel)
				if model, err = cl.NewChat(openai.ChatConfig{Model: name}); err != nil {
					return fmt.Errorf("chat model %s: %w", name, err)
				}
			}
			key, err := piiKeyFromEnv()
			if err != nil {
				return err
			}
			clk := &demoClock{}
			eng, err := memento.Open(ctx, memento.Config{DataDir: dir, PII: memento.PIIConfig{Key: key}, Now: clk.Now})
			if err != nil {
				return err
			}
			defer eng.Close()
			srv := mcp.New(mcp.Services{Runs: eng.Runs, Sessions: eng.Sessions, Memory: eng.Memory, Context: eng.Context, Retrieval: eng.Retrieval},
				mcp.Options{Version: buildVersion(), Classify: server.ClassifyError, OutcomeUnknown: server.OutcomeUnknown})
			b := mcp.Binding{Tenant: server.DefaultTenant, User: user}
			model0 := "the scripted planner"
			if model != nil {
				model0 = name
			}
			fmt.Fprintf(out, "GiftGenius: user %s, data %s, model %s\n", user, dir, model0)
			rep, err := giftgenius.RunDemo(ctx, giftgenius.DemoConfig{
				Connect:   inProcessMCP(srv, b),
				Advance:   clk.Advance,
				DeviceA:   phone,
				DeviceB:   laptop,
				Away:      away,
				Model:     model,
				ModelName: name,
				Out:       out,
			})
			if err != nil {
				return err
			}
			if !rep.OK() {
				return errors.New("demo giftgenius: the second visit did not resume the work without asking again")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&data, "data", "", "data directory of the embedded backend (default: a temporary one, removed afterwards; env "+envData+")")
	fl.StringVar(&modelURL, "model-url", "", "an OpenAI-compatible endpoint for the agent's model instead of the scripted planner (env "+envModelURL+"; its key comes from "+envModelAPIKey+")")
	fl.StringVar(&chatModel, "chat-model", giftgenius.DefaultModelName, "the chat model at --model-url (env "+envChatModel+")")
	fl.DurationVar(&away, "away", 7*24*time.Hour, "how long the user is away between the visits (the first session lives a day)")
	return cmd
}

// inProcessMCP connects an SDK client to srv over in-memory transports,
// bound to b: the agent uses Memento's tools as any MCP client does.
func inProcessMCP(srv *mcp.Server, b mcp.Binding) func(context.Context) (agent.Tools, func() error, error) {
	return func(ctx context.Context) (agent.Tools, func() error, error) {
		ct, st := gomcp.NewInMemoryTransports()
		ss, err := srv.Server(b).Connect(ctx, st, nil)
		if err != nil {
			return nil, nil, err
		}
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "giftgenius", Version: buildVersion()}, nil).Connect(ctx, ct, nil)
		if err != nil {
			_ = ss.Close()
			return nil, nil, err
		}
		return agent.NewMCP(cs), func() error { err := cs.Close(); _ = ss.Wait(); return err }, nil
	}
}

// demoClock is the engine's clock in the demo: real time, plus the time
// the demo made pass.
type demoClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *demoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *demoClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
