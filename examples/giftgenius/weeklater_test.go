package giftgenius_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/examples/giftgenius"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/memory"
)

var alice = mcp.Binding{Tenant: "t1", User: "alice"}

// options are the products an answer presents, by id, in order.
func options(t *testing.T, cat *giftgenius.Catalog, answer string) []giftgenius.Product {
	t.Helper()
	var ps []giftgenius.Product
	for _, line := range strings.Split(answer, "\n") {
		i, j := strings.LastIndex(line, "(p"), strings.LastIndex(line, ")")
		if i < 0 || j < i {
			continue
		}
		p, ok := cat.Product(line[i+1 : j])
		if !ok {
			t.Fatalf("answer presents %q, not a product", line)
		}
		ps = append(ps, p)
	}
	return ps
}

// visit1 is the first visit on device A: two turns collect the profile
// (the first asks, because the interests, budget and region are missing),
// then candidates, filter and choice. It returns the chosen product.
func visit1(t *testing.T, cat *giftgenius.Catalog, cfg giftgenius.Config) string {
	t.Helper()
	cfg.SessionID = "phone"
	a, err := giftgenius.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r1 := turn(t, a, giftgenius.Visit1[0])
	if got := giftgenius.QuestionsAbout(r1.Answer); !slices.Equal(got, []string{giftgenius.FieldInterests, giftgenius.FieldBudget, giftgenius.FieldRegion}) {
		t.Fatalf("turn 1 asked about %v, want interests, budget and region (the recipient was given): %q", got, r1.Answer)
	}
	if calls := modelCalls(r1); len(calls) == 0 || calls[0] != "memory_get" {
		t.Fatalf("turn 1: the model asked before it read the stored profile: %v", calls)
	}
	if cps := checkpoints(r1); len(cps) != 0 {
		t.Fatalf("turn 1 checkpointed %v before the profile was complete", cps)
	}
	if s := state(t, r1); s.Step != giftgenius.StepCollect || s.Locale != "en" || s.Profile == nil || s.Profile.Recipient != "Anna" || s.Profile.Relation != "friend" {
		t.Fatalf("turn 1 state %s", r1.State)
	}

	r2 := turn(t, a, giftgenius.Visit1[1])
	if got := checkpoints(r2); !slices.Equal(got, []string{"profile-collected", "candidates-generated", "filtered"}) {
		t.Fatalf("turn 2 checkpoints %v", got)
	}
	if q := giftgenius.QuestionsAbout(r2.Answer); len(q) != 0 {
		t.Fatalf("turn 2 asked about %v with a complete profile: %q", q, r2.Answer)
	}
	opts := options(t, cat, r2.Answer)
	if len(opts) == 0 {
		t.Fatalf("turn 2 presented no options: %q", r2.Answer)
	}
	for _, p := range opts {
		if p.PriceEUR > 60 || !slices.Contains(p.ShipsTo, "DE") || p.DeliveryDays > 5 {
			t.Fatalf("option %+v breaks budget 60, region DE or 5 days", p)
		}
	}
	s2 := state(t, r2)
	idsOnly(t, r2.State, cat)
	if s2.Step != giftgenius.StepFiltered || len(s2.CandidateIDs) <= len(s2.KeptIDs) || s2.KeptIDs[0] != opts[0].ID ||
		s2.Profile.BudgetEUR != 60 || s2.Profile.Region != "DE" || s2.Profile.DeliverWithinDays != 5 || !slices.Equal(s2.Profile.Interests, []string{"hiking", "coffee"}) {
		t.Fatalf("turn 2 state %s", r2.State)
	}

	r3 := turn(t, a, giftgenius.Visit1[2])
	if got := checkpoints(r3); !slices.Equal(got, []string{"final-choice"}) {
		t.Fatalf("turn 3 checkpoints %v", got)
	}
	s3 := state(t, r3)
	if s3.Step != giftgenius.StepFinal || s3.ChoiceID != opts[0].ID || !strings.Contains(r3.Answer, opts[0].Name) {
		t.Fatalf("turn 3: state %s, answer %q; want the first option %s", r3.State, r3.Answer, opts[0].ID)
	}
	idsOnly(t, r3.State, cat)
	return s3.ChoiceID
}

// TestWeekLater is the scenario of issue 11: the user chooses on one device,
// comes back a week later on another one (the session long expired) about
// the same friend with a bigger budget; the last checkpoint and the stored
// profile restore the work and nothing known is asked again.
func TestWeekLater(t *testing.T) { weekLater(t, nil) }

// weekLater runs the scenario with model (nil: the Planner in process).
func weekLater(t *testing.T, model llm.Chat) {
	ctx := context.Background()
	clk := testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	eng := openEngine(t, clk)
	srv := mcpServer(eng)
	connect := connector(t, srv, alice)
	cat, err := giftgenius.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}

	chosen := visit1(t, cat, giftgenius.Config{Memento: dial(t, connect), SessionTTL: 24 * time.Hour, Model: model})

	clk.Advance(7 * 24 * time.Hour)
	laptop := dial(t, connect)
	if _, kind := callJSON(t, laptop, "session_get", map[string]any{"session_id": "phone"}); kind != "session-not-found" {
		t.Fatalf("session phone a week after its day's TTL: %q, want session-not-found", kind)
	}

	a, err := giftgenius.New(giftgenius.Config{Memento: laptop, SessionID: "laptop", Model: model})
	if err != nil {
		t.Fatal(err)
	}
	r := turn(t, a, giftgenius.Visit2[0])
	if r.RestoredFrom != "final-choice" {
		t.Fatalf("restored from %q, want final-choice", r.RestoredFrom)
	}
	calls := modelCalls(r)
	if !slices.Contains(calls, "memory_get") {
		t.Fatalf("visit 2 did not read the stored profile: %v", calls)
	}
	if q := giftgenius.QuestionsAbout(r.Answer); len(q) != 0 {
		t.Fatalf("visit 2 asked about %v: %q", q, r.Answer)
	}
	// The steps are reached again: checkpointed again under new labels.
	if got := checkpoints(r); !slices.Equal(steps(got), []string{"profile-collected", "candidates-generated", "filtered"}) || slices.Contains(got, "filtered") {
		t.Fatalf("visit 2 checkpoints %v", got)
	}
	opts := options(t, cat, r.Answer)
	if len(opts) == 0 {
		t.Fatalf("visit 2 presented no options: %q", r.Answer)
	}
	dearer := false
	for _, p := range opts {
		if p.ID == chosen {
			t.Fatalf("visit 2 offers last time's choice %s again", chosen)
		}
		if p.PriceEUR > 120 || !slices.Contains(p.ShipsTo, "DE") {
			t.Fatalf("option %+v breaks budget 120 or region DE", p)
		}
		dearer = dearer || p.PriceEUR > 60
	}
	if !dearer {
		t.Fatalf("no option uses the bigger budget: %+v", opts)
	}
	prev, _ := cat.Product(chosen)
	if !strings.Contains(r.Answer, prev.Name) {
		t.Fatalf("visit 2 does not mention last time's choice %q: %q", prev.Name, r.Answer)
	}
	s := state(t, r)
	idsOnly(t, r.State, cat)
	if s.Step != giftgenius.StepFiltered || s.Locale != "en" || s.Profile.BudgetEUR != 120 || s.Profile.Region != "DE" || s.Profile.DeliverWithinDays != 0 ||
		!slices.Equal(s.PreviousChoiceIDs, []string{chosen}) || s.ChoiceID != "" {
		t.Fatalf("visit 2 state %s", r.State)
	}

	// The stored profile was superseded, not overwritten: two claims, each
	// citing the user's messages it came from.
	cur, _, err := eng.Memory.List(ctx, alice.Tenant, memory.Query{SubjectID: alice.User, Namespace: giftgenius.Namespace, Key: "anna"})
	if err != nil || len(cur) != 1 {
		t.Fatalf("current profile claims: %v %v", cur, err)
	}
	var p giftgenius.Profile
	if err := json.Unmarshal(cur[0].Value, &p); err != nil || p.BudgetEUR != 120 || p.Region != "DE" || !slices.Equal(p.Interests, []string{"hiking", "coffee"}) || p.DeliverWithinDays != 0 {
		t.Fatalf("current profile %s", cur[0].Value)
	}
	hist, err := eng.Memory.History(ctx, alice.Tenant, cur[0].MemoryID)
	if err != nil || len(hist) != 2 {
		t.Fatalf("history: %d claims, %v", len(hist), err)
	}
	var old, now memory.Claim
	for _, c := range hist {
		if c.MemoryID == cur[0].MemoryID {
			now = c
		} else {
			old = c
		}
	}
	if now.Supersedes != old.MemoryID || old.MemoryID == "" {
		t.Fatalf("the new claim supersedes %q, want %q", now.Supersedes, old.MemoryID)
	}
	// Visit 1: "... my friend Anna" was message 1, the interests, budget
	// and region message 3 (2 is the answer); visit 2: message 1.
	if pv := old.Provenance; pv.SourceID != "session:phone" || !slices.Equal(pv.MessageIDs, []string{"1", "3"}) || pv.ValidatedBy != memory.ValidatedUserStated {
		t.Fatalf("first claim's provenance %+v", pv)
	}
	if pv := now.Provenance; pv.SourceID != "session:laptop" || !slices.Equal(pv.MessageIDs, []string{"1"}) {
		t.Fatalf("second claim's provenance %+v", pv)
	}
	var oldP giftgenius.Profile
	if err := json.Unmarshal(old.Value, &oldP); err != nil || oldP.BudgetEUR != 60 {
		t.Fatalf("first claim %s", old.Value)
	}

	// The user chooses again: the round ends with its own checkpoint.
	r2 := turn(t, a, giftgenius.Visit2[1])
	if got := checkpoints(r2); !slices.Equal(steps(got), []string{"final-choice"}) || got[0] == "final-choice" {
		t.Fatalf("visit 2 choice checkpoints %v", got)
	}
	if s := state(t, r2); s.ChoiceID != opts[0].ID {
		t.Fatalf("visit 2 chose %s, want %s", s.ChoiceID, opts[0].ID)
	}
	checkRunSteps(t, eng, alice, []string{"profile-collected", "candidates-generated", "filtered", "final-choice",
		"profile-collected", "candidates-generated", "filtered", "final-choice"})
}

// steps are the steps checkpoint labels name.
func steps(labels []string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = giftgenius.CheckpointStep(l)
	}
	return out
}

// checkRunSteps checks the user's run holds checkpoints of exactly these
// steps, in order.
func checkRunSteps(t *testing.T, eng *memento.Engine, b mcp.Binding, want []string) {
	t.Helper()
	id, err := mcp.RunID(b.User, giftgenius.DefaultRun)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := eng.Runs.Store().ListCheckpoints(context.Background(), b.Tenant, id, 0, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cps {
		got = append(got, giftgenius.CheckpointStep(c.Label))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("run checkpoints %v, want %v", got, want)
	}
}
