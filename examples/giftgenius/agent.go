package giftgenius

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/llm"
)

// Defaults of Config.
const (
	DefaultRun          = "giftgenius"
	DefaultWorkflow     = "giftgenius"
	DefaultLocale       = "en"
	DefaultModelName    = "gpt-4o-mini"
	DefaultBudgetTokens = 12000
)

// System is the system prompt: with the tools' schemas it is all a real
// model needs to follow the same procedure as the Planner.
const System = `You are GiftGenius. You help the user choose a gift for someone from a small catalogue, in English.

Procedure:
1. Before asking the user anything, read what is known: the session state shown to you, and the stored
   recipient profiles: call memory_get with namespace "giftgenius.recipients" (key: the recipient's first name
   in lower case; no key lists every recipient). A user who says "the same friend" means the recipient in the
   session state's profile_draft.
2. A complete profile has recipient (a first name), interests (a list such as ["hiking","coffee"]), budget_eur
   (a number) and region (an ISO country code such as DE). relation and deliver_within_days (the occasion's
   deadline) are optional. Ask only for what is still missing, all in one message. Never ask again for what
   the session state or a stored profile already says.
3. Keep the draft in the session: session_patch {"patch": {"profile_draft": {...}}}.
4. When the profile is complete and differs from the stored one, keep it: call messages_list, then memory_add with
   namespace "giftgenius.recipients", key = the recipient's name in lower case, value = the profile without
   deliver_within_days, message_seqs = the seqs of the user's messages that stated it, and supersedes = the
   stored profile's memory_id when there is one.
5. catalog_search with the interests, then catalog_filter the candidate ids with budget_eur, region and
   deliver_within_days. Present at most three kept options, numbered, each with name, price and id, and ask the
   user to choose. The tools keep the ids in the session; never put product details in the session yourself.
6. When the user chooses, call gift_finalize with that product's id and confirm the choice.`

// Config is one GiftGenius agent: one user's device, one session.
type Config struct {
	// Memento are Memento's tools bound to the user (over MCP: agent.NewMCP).
	Memento agent.Tools
	// SessionID is this device's conversation.
	SessionID string
	// Model answers; nil is the scripted Planner. ModelName is sent to it
	// and picks the tokenizer (default DefaultModelName).
	Model     llm.Chat
	ModelName string
	// SessionTTL is how long the session lives without activity (default:
	// the server's).
	SessionTTL time.Duration
	// Locale goes into a new session's state (default DefaultLocale).
	Locale string
	// Run names the user's gift-search run, which outlives sessions
	// (default DefaultRun).
	Run string
	// BudgetTokens bounds every prompt (default DefaultBudgetTokens).
	BudgetTokens int
	// Catalog is the catalogue (default: the embedded one).
	Catalog *Catalog
}

// ModelTools are the tools the model is offered: session state, messages,
// memory and the app's own.
var ModelTools = []string{"session_get", "session_patch", "messages_list", "memory_get", "memory_search", "memory_add",
	ToolSearch, ToolFilter, ToolFinalize}

// New returns the agent: Memento's tools joined with the app's, the
// checkpoints of the four steps, and the system prompt.
func New(cfg Config) (*agent.Agent, error) {
	if cfg.Memento == nil || cfg.SessionID == "" {
		return nil, fmt.Errorf("giftgenius: Memento's tools and a session id are required")
	}
	if cfg.Model == nil {
		cfg.Model = Planner()
	}
	if cfg.ModelName == "" {
		cfg.ModelName = DefaultModelName
	}
	if cfg.Locale == "" {
		cfg.Locale = DefaultLocale
	}
	if cfg.Run == "" {
		cfg.Run = DefaultRun
	}
	if cfg.BudgetTokens == 0 {
		cfg.BudgetTokens = DefaultBudgetTokens
	}
	if cfg.Catalog == nil {
		c, err := LoadCatalog()
		if err != nil {
			return nil, err
		}
		cfg.Catalog = c
	}
	app, err := NewAppTools(cfg.Catalog, cfg.Memento, cfg.SessionID)
	if err != nil {
		return nil, err
	}
	initial, err := json.Marshal(State{Step: StepCollect, Locale: cfg.Locale})
	if err != nil {
		return nil, fmt.Errorf("giftgenius: encode the initial state: %w", err)
	}
	return agent.New(agent.Config{
		Model:        cfg.Model,
		ModelName:    cfg.ModelName,
		Tools:        agent.Join(cfg.Memento, app),
		SessionID:    cfg.SessionID,
		System:       System,
		BudgetTokens: cfg.BudgetTokens,
		MaxSteps:     12,
		InitialState: initial,
		SessionTTL:   cfg.SessionTTL,
		Checkpoints:  &agent.Checkpoints{Run: cfg.Run, Workflow: DefaultWorkflow, Mark: mark},
		ModelTools:   func(name string) bool { return slices.Contains(ModelTools, name) },
	})
}

// StepOf is the step a successful tool call completes ("" for none): a
// complete profile kept, candidates generated, candidates filtered, a final
// choice made.
func StepOf(name string, r agent.ToolResult) string {
	if r.IsError {
		return ""
	}
	switch name {
	case "memory_add":
		var out struct {
			Outcome string `json:"outcome"`
			Memory  struct {
				Namespace string          `json:"namespace"`
				Value     json.RawMessage `json:"value"`
			} `json:"memory"`
		}
		if json.Unmarshal(r.JSON, &out) != nil || out.Memory.Namespace != Namespace {
			return ""
		}
		var p Profile
		if json.Unmarshal(out.Memory.Value, &p) != nil || len(p.Missing()) > 0 {
			return ""
		}
		switch out.Outcome {
		case "added", "superseded", "merged":
			return StepProfile
		}
	case ToolSearch:
		return StepCandidates
	case ToolFilter:
		return StepFiltered
	case ToolFinalize:
		return StepFinal
	}
	return ""
}

// nextStep is what the run continues with after each step.
var nextStep = map[string]string{StepProfile: "search", StepCandidates: "filter", StepFiltered: "choose", StepFinal: "follow-up"}

// mark checkpoints a completed step under its name. A later visit reaches
// the steps again; the loop then labels the checkpoint with the revision
// ("filtered-r12"), labels being unique per run.
func mark(c agent.Call, r agent.ToolResult) (agent.Checkpoint, bool) {
	step := StepOf(c.Name, r)
	if step == "" {
		return agent.Checkpoint{}, false
	}
	return agent.Checkpoint{Label: step, NextStep: nextStep[step]}, true
}

// CheckpointStep is the step a checkpoint label names ("filtered-r12" ->
// "filtered").
func CheckpointStep(label string) string {
	if i := strings.LastIndex(label, "-r"); i > 0 {
		if _, err := strconv.Atoi(label[i+2:]); err == nil {
			return label[:i]
		}
	}
	return label
}
