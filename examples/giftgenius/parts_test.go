package giftgenius_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/examples/giftgenius"
)

func TestCatalog(t *testing.T) {
	cat, err := giftgenius.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	ps := cat.Products()
	if len(ps) < 20 || len(ps) > 30 {
		t.Fatalf("%d products, want a small catalogue of 20 to 30", len(ps))
	}
	for _, p := range ps {
		if p.Name == "" || p.PriceEUR <= 0 || p.DeliveryDays <= 0 || len(p.ShipsTo) == 0 || len(p.Tags) == 0 {
			t.Errorf("product %+v is incomplete", p)
		}
		for _, tag := range p.Tags {
			if giftgenius.NormalizeInterest(tag) != tag {
				t.Errorf("%s: tag %q is no interest the parser knows", p.ID, tag)
			}
		}
		for _, r := range p.ShipsTo {
			if giftgenius.NormalizeRegion(r) != r {
				t.Errorf("%s: region %q unknown", p.ID, r)
			}
		}
	}
	got := cat.Search([]string{"hiking", "coffee"}, []string{"p02"})
	if len(got) == 0 || len(got[0].Matches) != 2 || slices.ContainsFunc(got, func(b giftgenius.Brief) bool { return b.ID == "p02" }) {
		t.Fatalf("search: %+v", got)
	}
	for i := 1; i < len(got); i++ {
		if len(got[i].Matches) > len(got[i-1].Matches) {
			t.Fatalf("search not ranked by matches: %+v", got)
		}
	}
	kept, dropped := cat.Filter([]string{"p01", "p02", "p09", "p25", "nope"}, 100, "FR", 5)
	if len(kept) != 2 || kept[0].ID != "p01" || kept[1].ID != "p02" || len(dropped) != 3 {
		t.Fatalf("filter: kept %+v dropped %+v", kept, dropped)
	}
	why := map[string][]string{}
	for _, d := range dropped {
		why[d.ID] = d.Reasons
	}
	// p09 is over the budget and ships to DE only; p25 takes 6 days.
	if len(why["p09"]) != 2 || len(why["p25"]) != 1 || len(why["nope"]) != 1 {
		t.Fatalf("reasons %v", why)
	}
}

func TestParseFacts(t *testing.T) {
	for _, c := range []struct {
		text string
		want giftgenius.Facts
	}{
		{"Hi! I'm looking for a birthday gift for my friend Anna.", giftgenius.Facts{Recipient: "Anna", Relation: "friend"}},
		{"She loves hiking and coffee. My budget is 60 euros, and it should ship to Germany within 5 days.",
			giftgenius.Facts{Interests: []string{"hiking", "coffee"}, BudgetEUR: 60, Region: "DE", Days: 5}},
		{"Same friend as last time, but a bigger budget this time: up to 120 euros.", giftgenius.Facts{Same: true, BudgetEUR: 120}},
		{"Same friend, bigger budget.", giftgenius.Facts{Same: true, BiggerBudget: true}},
		{"Something for my sister Maria in the UK, €45, she reads a lot of books and likes board games", giftgenius.Facts{Recipient: "Maria", Relation: "sister", Region: "GB", BudgetEUR: 45, Interests: []string{"reading", "games"}}},
		{"a gift for Tom, EUR 80, ship to the United States in a week", giftgenius.Facts{Recipient: "Tom", BudgetEUR: 80, Region: "US", Days: 7}},
		{"tell us more", giftgenius.Facts{}},
	} {
		got := giftgenius.ParseFacts(c.text)
		if got.Recipient != c.want.Recipient || got.Relation != c.want.Relation || !slices.Equal(got.Interests, c.want.Interests) || got.BudgetEUR != c.want.BudgetEUR ||
			got.BiggerBudget != c.want.BiggerBudget || got.Region != c.want.Region || got.Days != c.want.Days || got.Same != c.want.Same {
			t.Errorf("%q:\n got %+v\nwant %+v", c.text, got, c.want)
		}
	}
}

func TestParseChoice(t *testing.T) {
	offered := []string{"p02", "p07", "p09"}
	names := map[string]string{"Summit Espresso Set": "p02", "Insulated Trail Flask": "p07"}
	for text, want := range map[string]string{
		"I'll take the first one.":        "p02",
		"The second, please":              "p07",
		"number 3":                        "p09",
		"3":                               "p09",
		"Let's go with p07":               "p07",
		"the insulated trail flask it is": "p07",
		"p01 please":                      "",
		"number 4":                        "",
		"hmm, not sure":                   "",
	} {
		got, ok := giftgenius.ParseChoice(text, offered, names)
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", text, got, ok, want)
		}
	}
}

func TestQuestionsAbout(t *testing.T) {
	for text, want := range map[string][]string{
		"Who is the gift for? What is she into? What's your budget? Which country should it ship to?": {"recipient", "interests", "budget", "region"},
		"Here are three options. Which one would you like?":                                           nil,
		"Tell me which one you'd like.":                                                               nil,
		"How much would you like to spend now, in euros?":                                             {"budget"},
		"I know Anna likes hiking. When do you need it?":                                              {"deadline"},
		"Does she still live in Germany?":                                                             {"region"},
	} {
		if got := giftgenius.QuestionsAbout(text); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
}

// The app's tools guard what reaches the session: unknown interests,
// places and products are errors the model reads, a product that did not
// pass the filter cannot be finalized, and nothing is written then.
func TestAppToolsRefuse(t *testing.T) {
	eng := openEngine(t, nil)
	tools := dial(t, connector(t, mcpServer(eng), alice))
	cat, err := giftgenius.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if _, kind := callJSON(t, tools, "session_put", map[string]any{"session_id": "s", "state": map[string]any{"step": "collect-profile"}}); kind != "" {
		t.Fatal(kind)
	}
	app, err := giftgenius.NewAppTools(cat, tools, "s")
	if err != nil {
		t.Fatal(err)
	}
	all := agent.Join(tools, app)
	for _, c := range []struct {
		name string
		args any
		kind string
	}{
		{giftgenius.ToolSearch, map[string]any{"interests": []string{"knitting"}}, "no-known-interest"},
		{giftgenius.ToolSearch, map[string]any{"interests": "hiking"}, "invalid-arguments"},
		{giftgenius.ToolFilter, map[string]any{"ids": []string{"p01"}, "budget_eur": 50, "region": "Mars"}, "invalid-arguments"},
		{giftgenius.ToolFilter, map[string]any{"ids": []string{"p01"}, "budget_eur": 0, "region": "DE"}, "invalid-arguments"},
		{giftgenius.ToolFilter, map[string]any{"budget_eur": 50, "region": "DE"}, "invalid-arguments"},
		{giftgenius.ToolFinalize, map[string]any{"product_id": "p99"}, "unknown-product"},
		{giftgenius.ToolFinalize, map[string]any{"product_id": "p01"}, "not-an-option"},
	} {
		if _, kind := callJSON(t, all, c.name, c.args); kind != c.kind {
			t.Errorf("%s %v: %q, want %q", c.name, c.args, kind, c.kind)
		}
	}
	out, _ := callJSON(t, tools, "session_get", map[string]any{"session_id": "s"})
	if b, _ := json.Marshal(out["state"]); string(b) != `{"step":"collect-profile"}` {
		t.Fatalf("refused calls changed the state: %s", b)
	}
	// Filtered out (over budget): still not an option.
	if _, kind := callJSON(t, all, giftgenius.ToolSearch, map[string]any{"interests": []string{"coffee"}}); kind != "" {
		t.Fatal(kind)
	}
	if _, kind := callJSON(t, all, giftgenius.ToolFilter, map[string]any{"ids": []string{"p02", "p11"}, "budget_eur": 50, "region": "germany"}); kind != "" {
		t.Fatal(kind)
	}
	if _, kind := callJSON(t, all, giftgenius.ToolFinalize, map[string]any{"product_id": "p02"}); kind != "not-an-option" {
		t.Fatalf("finalizing a product over the budget: %q", kind)
	}
	if _, kind := callJSON(t, all, giftgenius.ToolFinalize, map[string]any{"product_id": "p11"}); kind != "" {
		t.Fatal(kind)
	}
	out, _ = callJSON(t, tools, "session_get", map[string]any{"session_id": "s"})
	b, _ := json.Marshal(out["state"])
	idsOnly(t, b, cat)
	var s giftgenius.State
	_ = json.Unmarshal(b, &s)
	if s.Step != giftgenius.StepFinal || s.ChoiceID != "p11" || !slices.Equal(s.KeptIDs, []string{"p11"}) {
		t.Fatalf("state %s", b)
	}
}

// A returning user who raises the budget without an amount is asked for
// the amount, and only that; the answer then finds the options.
func TestBiggerBudgetWithoutAmount(t *testing.T) {
	clk := testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	eng := openEngine(t, clk)
	connect := connector(t, mcpServer(eng), alice)
	cat, err := giftgenius.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	visit1(t, cat, giftgenius.Config{Memento: dial(t, connect), SessionTTL: time.Hour})
	clk.Advance(3 * 24 * time.Hour)
	a, err := giftgenius.New(giftgenius.Config{Memento: dial(t, connect), SessionID: "tablet"})
	if err != nil {
		t.Fatal(err)
	}
	r := turn(t, a, "Same friend, bigger budget.")
	if q := giftgenius.QuestionsAbout(r.Answer); !slices.Equal(q, []string{giftgenius.FieldBudget}) || r.RestoredFrom != "final-choice" {
		t.Fatalf("asked about %v (restored from %q): %q", q, r.RestoredFrom, r.Answer)
	}
	if cps := checkpoints(r); len(cps) != 0 {
		t.Fatalf("checkpointed %v before the budget was known", cps)
	}
	r = turn(t, a, "Let's say 100 euros.")
	if q := giftgenius.QuestionsAbout(r.Answer); len(q) != 0 {
		t.Fatalf("asked about %v: %q", q, r.Answer)
	}
	opts := options(t, cat, r.Answer)
	if len(opts) == 0 || opts[0].PriceEUR > 100 || opts[0].PriceEUR <= 60 {
		t.Fatalf("options %+v for a budget of 100", opts)
	}
	if s := state(t, r); s.Profile.BudgetEUR != 100 || s.Step != giftgenius.StepFiltered {
		t.Fatalf("state %s", r.State)
	}
}
