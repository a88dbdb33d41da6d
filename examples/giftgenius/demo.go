package giftgenius

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/llm"
)

// The demo's user lines: a first visit that collects the profile over two
// turns and chooses, and a visit a week later on another device.
var (
	Visit1 = []string{
		"Hi! I'm looking for a birthday gift for my friend Anna.",
		"She loves hiking and coffee. My budget is 60 euros, and it should ship to Germany within 5 days.",
		"I'll take the first one.",
	}
	Visit2 = []string{
		"Hi again! Same friend as last time, but a bigger budget this time: up to 120 euros.",
		"The first one, please.",
	}
)

// Known are the fields a returning user must not be asked about again.
var Known = []string{FieldRecipient, FieldInterests, FieldBudget, FieldRegion}

// DemoConfig is a run of the two visits.
type DemoConfig struct {
	// Connect opens Memento's tools for the demo's user, once per device
	// (a new MCP connection); close ends it.
	Connect func(ctx context.Context) (tools agent.Tools, close func() error, err error)
	// Advance moves the engine's clock; nil leaves it (the first device's
	// session then has not expired when the second visit starts).
	Advance func(d time.Duration)
	// Away is how long the user is away (default a week); SessionTTL the
	// first device's session TTL (default a day).
	Away, SessionTTL time.Duration
	// Model and ModelName as in Config (nil: the scripted Planner).
	Model     llm.Chat
	ModelName string
	// Devices name the two sessions (default "phone" and "laptop").
	DeviceA, DeviceB string
	// Out receives the dialogue; nil discards it.
	Out io.Writer
}

// DemoReport is what the two visits did.
type DemoReport struct {
	Visit1, Visit2 []agent.Result
	// Moved: the engine's clock moved by Away between the visits.
	Moved bool
	// SessionAGone: the first device's session was gone when the user came back.
	SessionAGone bool
	// RestoredFrom is the checkpoint the second visit's session was restored from.
	RestoredFrom string
	// Reasked are the known fields the second visit asked about again.
	Reasked []string
}

// OK reports whether the second visit restored the work and asked nothing
// it knew.
func (r DemoReport) OK() bool { return r.RestoredFrom != "" && len(r.Reasked) == 0 }

// RunDemo runs the two visits and prints the dialogue.
func RunDemo(ctx context.Context, cfg DemoConfig) (DemoReport, error) {
	var rep DemoReport
	if cfg.Connect == nil {
		return rep, errors.New("giftgenius demo: Connect is required")
	}
	if cfg.Away == 0 {
		cfg.Away = 7 * 24 * time.Hour
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 24 * time.Hour
	}
	if cfg.DeviceA == "" {
		cfg.DeviceA = "phone"
	}
	if cfg.DeviceB == "" {
		cfg.DeviceB = "laptop"
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	visit := func(n int, device, session, about string, ttl time.Duration, lines []string) ([]agent.Result, error) {
		tools, closeTools, err := cfg.Connect(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = closeTools() }()
		a, err := New(Config{Memento: tools, SessionID: session, SessionTTL: ttl, Model: cfg.Model, ModelName: cfg.ModelName})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "== visit %d: device %s, session %s (%s)\n", n, device, session, about)
		var results []agent.Result
		for _, line := range lines {
			res, err := a.Turn(ctx, line)
			results = append(results, res)
			if res.RestoredFrom != "" {
				fmt.Fprintf(out, "   [no session %s: restored from checkpoint %q: %s]\n", session, res.RestoredFrom, restoredState(res))
			}
			fmt.Fprintf(out, "user:  %s\n", line)
			if err != nil {
				return results, fmt.Errorf("giftgenius demo: visit %d: %w", n, err)
			}
			fmt.Fprintf(out, "agent: %s\n", indent(res.Answer))
			if t := traceLine(res); t != "" {
				fmt.Fprintf(out, "   [%s]\n", t)
			}
		}
		return results, nil
	}
	var err error
	if rep.Visit1, err = visit(1, "A", cfg.DeviceA, "lives "+span(cfg.SessionTTL)+" without activity", cfg.SessionTTL, Visit1); err != nil {
		return rep, err
	}
	if cfg.Advance != nil {
		cfg.Advance(cfg.Away)
		rep.Moved = true
		fmt.Fprintf(out, "== %s later (the engine's clock moved)\n", span(cfg.Away))
	}
	gone, err := sessionGone(ctx, cfg.Connect, cfg.DeviceA)
	if err != nil {
		return rep, err
	}
	rep.SessionAGone = gone
	if gone {
		fmt.Fprintf(out, "   [session %s has expired]\n", cfg.DeviceA)
	} else {
		fmt.Fprintf(out, "   [session %s is still there; the new device does not use it]\n", cfg.DeviceA)
	}
	if rep.Visit2, err = visit(2, "B", cfg.DeviceB, "new", 0, Visit2); err != nil {
		return rep, err
	}
	rep.RestoredFrom = rep.Visit2[0].RestoredFrom
	for _, r := range rep.Visit2 {
		for _, f := range QuestionsAbout(r.Answer) {
			if slices.Contains(Known, f) && !slices.Contains(rep.Reasked, f) {
				rep.Reasked = append(rep.Reasked, f)
			}
		}
	}
	switch {
	case rep.OK():
		fmt.Fprintf(out, "== ok: visit 2 resumed from %q and asked nothing it knew\n", rep.RestoredFrom)
	case rep.RestoredFrom == "":
		fmt.Fprintln(out, "== FAILED: visit 2 was not restored from a checkpoint")
	default:
		fmt.Fprintf(out, "== FAILED: visit 2 asked again about %s\n", strings.Join(rep.Reasked, ", "))
	}
	return rep, nil
}

// sessionGone reports whether a session is gone (expired, closed, never there).
func sessionGone(ctx context.Context, connect func(context.Context) (agent.Tools, func() error, error), id string) (bool, error) {
	tools, closeTools, err := connect(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = closeTools() }()
	args, _ := json.Marshal(map[string]string{"session_id": id})
	r, err := tools.Call(ctx, "session_get", args)
	if err != nil {
		return false, fmt.Errorf("giftgenius demo: session_get: %w", err)
	}
	return r.IsError && strings.HasSuffix(r.ErrorType(), "not-found"), nil
}

// restoredState describes the state a session was restored with.
func restoredState(res agent.Result) string {
	for _, e := range res.Trace {
		if e.Name != agent.ToolRunRestore || e.Result.IsError {
			continue
		}
		var out struct {
			State State `json:"state"`
		}
		if json.Unmarshal(e.Result.JSON, &out) != nil {
			return "?"
		}
		s := out.State
		parts := []string{"step " + s.Step}
		if s.Profile != nil {
			parts = append(parts, "profile "+s.Profile.Summary())
		}
		if s.ChoiceID != "" {
			parts = append(parts, "choice "+s.ChoiceID)
		}
		return strings.Join(parts, "; ")
	}
	return ""
}

// traceLine lists the model's tool calls and the checkpoints they made.
func traceLine(res agent.Result) string {
	var parts []string
	for _, e := range res.Trace {
		if e.Step == 0 {
			continue
		}
		p := e.Name
		if e.Result.IsError {
			p += " (error " + e.Result.ErrorType() + ")"
		}
		if e.Checkpoint != "" {
			p += " -> checkpoint " + e.Checkpoint
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n       ") }

// span says a duration the way a person would.
func span(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == day:
		return "a day"
	case d == 7*day:
		return "a week"
	case d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
