package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
)

var sept1 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

func userMsgs(texts ...string) []memory.Message {
	out := make([]memory.Message, len(texts))
	for i, t := range texts {
		out[i] = memory.Message{ID: fmt.Sprintf("m%d", i+1), Role: "user", Content: t, At: sept1}
	}
	return out
}

// render is a candidate as a test reads it: key=value, then " correction"
// and " retracts X" when they apply.
func render(c memory.Candidate) string {
	s := c.Key + "=" + string(c.Value)
	if c.Kind == memory.KindCorrection {
		s += " correction"
	}
	if len(c.Retracts) > 0 {
		s += " retracts " + string(c.Retracts)
	}
	return s
}

func extractOne(t *testing.T, text string) memory.Extraction {
	t.Helper()
	ex, err := Rules{}.Extract(context.Background(), userMsgs(text))
	if err != nil {
		t.Fatalf("Extract(%q): %v", text, err)
	}
	return ex
}

func TestRulesPhrasings(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		// names
		{"My name is Anna Petrova.", []string{`name="Anna Petrova"`}},
		{"Hi, my name's Bob", []string{`name="Bob"`}},
		{"my first name is John and I'm from Texas", []string{`name="John"`, `origin="Texas"`}},
		{"Call me Ann", []string{`preferred_name="Ann"`}},
		{"you can call me Sasha", []string{`preferred_name="Sasha"`}},
		{"My nickname is Kit", []string{`preferred_name="Kit"`}},
		{"I go by Alex", []string{`preferred_name="Alex"`}},
		{"Hi, I'm Anna.", []string{`name="Anna"`}},
		{"I've been a teacher for ten years", []string{`occupation="teacher"`}},
		{"I'm a huge fan of jazz", []string{`likes.jazz="jazz"`}},
		{"I'm not a fan of mugs", []string{`dislikes.mugs="mugs"`}},
		{"I'm into jazz", []string{`likes.jazz="jazz"`}},
		{"I love the beach", []string{`likes.beach="beach"`}},
		{"I like cats more than dogs", []string{`likes.cats="cats"`}},
		{"my surname is Ivanova", []string{`family_name="Ivanova"`}},
		// language
		{"Please answer in Russian.", []string{`preference.language="Russian"`}},
		{"answer in russian", []string{`preference.language="Russian"`}},
		{"Reply in German from now on", []string{`preference.language="German"`}},
		{"From now on, respond in English please", []string{`preference.language="English"`}},
		{"Could you reply in French?", []string{`preference.language="French"`}},
		{"can you please answer in Spanish", []string{`preference.language="Spanish"`}},
		{"I want you to respond in Italian", []string{`preference.language="Italian"`}},
		{"I'd prefer answers in Polish", []string{`preference.language="Polish"`}},
		{"I prefer Russian", []string{`preference.language="Russian"`}},
		{"Let's speak Ukrainian", []string{`preference.language="Ukrainian"`}},
		{"Actually, answer in English", []string{`preference.language="English" correction`}},
		{"I speak French and German", []string{`languages.spoken.french="French"`, `languages.spoken.german="German"`}},
		{"My native language is Portuguese", []string{`language.native="Portuguese"`}},
		// places
		{"I live in Saint Petersburg since May", []string{`home.city="Saint Petersburg"`}},
		{"I live in St. Petersburg with my wife", []string{`home.city="St. Petersburg"`}},
		{"I moved to Berlin in May.", []string{`home.city="Berlin"`}},
		{"We're settled: I've moved to Lisbon", []string{`home.city="Lisbon"`}},
		{"I'm based in New York", []string{`home.city="New York"`}},
		{"I've lived in Tokyo since 2019", []string{`home.city="Tokyo"`}},
		{"I'm from Kyiv", []string{`origin="Kyiv"`}},
		{"I'm originally from Buenos Aires", []string{`origin="Buenos Aires"`}},
		{"I come from Oslo", []string{`origin="Oslo"`}},
		{"I grew up in Manchester", []string{`origin="Manchester"`}},
		{"i live in paris", []string{`home.city="paris"`}},
		{"I was born in Minsk", []string{`birthplace="Minsk"`}},
		// likes and dislikes
		{"I love green tea", []string{`likes.green_tea="green tea"`}},
		{"I really enjoy hiking in the mountains", []string{`likes.hiking_in_the_mountains="hiking in the mountains"`}},
		{"I like tea, coffee and juice", []string{`likes.tea="tea"`, `likes.coffee="coffee"`, `likes.juice="juice"`}},
		{"I love jazz and hate techno", []string{`likes.jazz="jazz"`, `dislikes.techno="techno"`}},
		{"I hate mugs", []string{`dislikes.mugs="mugs"`}},
		{"I absolutely hate mugs!", []string{`dislikes.mugs="mugs"`}},
		{"I can't stand cilantro", []string{`dislikes.cilantro="cilantro"`}},
		{"I dislike loud music", []string{`dislikes.loud_music="loud music"`}},
		{"I don't like cilantro", []string{`dislikes.cilantro="cilantro"`}},
		{"I do not like olives at all", []string{`dislikes.olives="olives"`}},
		{"I love to cook", []string{`likes.cook="cook"`}},
		{"I love \"Dune\"", []string{`likes.dune="Dune"`}},
		{"My favorite color is blue", []string{`favorite.color="blue"`}},
		{"my favourite band is Radiohead", []string{`favorite.band="Radiohead"`}},
		// A denied favorite retracts it; it is never kept as "not pizza".
		{"My favorite food is not pizza.", []string{`favorite.food=null correction retracts "pizza"`}},
		{"My favorite food isn't pizza.", []string{`favorite.food=null correction retracts "pizza"`}},
		{"My favorite color is no longer red.", []string{`favorite.color=null correction retracts "red"`}},
		// health and diet
		{"I'm allergic to peanuts and shellfish", []string{`health.allergies.peanuts="peanuts"`, `health.allergies.shellfish="shellfish"`}},
		{"I have a nut allergy", []string{`health.allergies.nut="nut"`}},
		{"I'm vegetarian", []string{`diet="vegetarian"`}},
		{"I'm a vegan", []string{`diet="vegan"`}},
		{"I'm lactose intolerant", []string{`diet="lactose-intolerant"`}},
		{"I don't eat pork", []string{`diet.avoids.pork="pork"`}},
		{"I have asthma", []string{`health.conditions.asthma="asthma"`}},
		// occupation
		{"I work as a software engineer", []string{`occupation="software engineer"`}},
		{"I'm a nurse", []string{`occupation="nurse"`}},
		{"I am a high school teacher", []string{`occupation="high school teacher"`}},
		{"I work at Acme Corp", []string{`work.employer="Acme Corp"`}},
		{"I work for Google", []string{`work.employer="Google"`}},
		// relationships and third persons
		{"my wife Anna loves roses", []string{`relationship.wife={"name":"Anna","relation":"wife"}`, `wife.likes.roses="roses"`}},
		{"My husband is called Mark", []string{`relationship.husband={"name":"Mark","relation":"husband"}`}},
		{"My friend hates mugs", []string{`friend.dislikes.mugs="mugs"`}},
		{"my brother Tom lives in Boston", []string{`relationship.brother.tom={"name":"Tom","relation":"brother"}`, `brother.tom.home.city="Boston"`}},
		{"my wife's birthday is June 3", []string{`wife.birthday={"day":3,"month":6}`}},
		{"My mom is a doctor", []string{`mother.occupation="doctor"`}},
		{"my daughter is allergic to eggs", []string{`daughter.health.allergies.eggs="eggs"`}},
		{"I'm married to Olga", []string{`relationship.spouse={"name":"Olga","relation":"spouse"}`}},
		// birthdays and age
		{"my birthday is May 5th", []string{`birthday={"day":5,"month":5}`}},
		{"My birthday is on the 21st of March", []string{`birthday={"day":21,"month":3}`}},
		{"I was born on 3 June 1990", []string{`birthday={"day":3,"month":6,"year":1990}`}},
		{"I was born in 1985", []string{`birth_year=1985`}},
		{"I'm 34 years old", []string{`age=34`}},
		// corrections and negations
		{"Actually, I live in Lyon", []string{`home.city="Lyon" correction`}},
		{"No, I live in Lyon now", []string{`home.city="Lyon" correction`}},
		{"Sorry, my name is Anne", []string{`name="Anne" correction`}},
		{"I no longer live in Paris", []string{`home.city=null correction retracts "Paris"`}},
		{"I don't live in Paris anymore", []string{`home.city=null correction retracts "Paris"`}},
		{"I used to live in Paris", []string{`home.city=null correction retracts "Paris"`}},
		{"I'm not vegetarian anymore", []string{`diet=null correction retracts "vegetarian"`}},
		{"I'm no longer a teacher", []string{`occupation=null correction retracts "teacher"`}},
		{"I no longer like coffee", []string{`likes.coffee=null correction retracts "coffee"`}},
		{"I don't like coffee anymore", []string{`likes.coffee=null correction retracts "coffee"`}},
		{"I don't hate mugs any more", []string{`dislikes.mugs=null correction retracts "mugs"`}},
		{"I don't work at Acme anymore", []string{`work.employer=null correction retracts "Acme"`}},
		// mood: reported as a candidate so the policy refuses it visibly
		{"I'm so tired today", []string{`mood="tired"`}},
		{"I feel sad", []string{`mood="sad"`}},
		{"I'm not happy", []string{`mood="not happy"`}},
		// several clauses
		{"hi! I'm Bob, I live in Denver and I love skiing", []string{`name="Bob"`, `home.city="Denver"`, `likes.skiing="skiing"`}},
		{"I love tea but I hate coffee; my name is Li", []string{`likes.tea="tea"`, `dislikes.coffee="coffee"`, `name="Li"`}},
		// Russian
		{"Меня зовут Анна", []string{`name="Анна"`}},
		{"я живу в Москве", []string{`home.city="Москве"`}},
		{"Я больше не живу в Казани", []string{`home.city=null correction retracts "Казани"`}},
		{"отвечай по-русски", []string{`preference.language="Russian"`}},
		{"Пожалуйста, отвечай на русском", []string{`preference.language="Russian"`}},
		{"пиши по-английски", []string{`preference.language="English"`}},
		{"я люблю кошек", []string{`likes.кошек="кошек"`}},
		{"я не люблю кофе", []string{`dislikes.кофе="кофе"`}},
		{"Я из Новосибирска", []string{`origin="Новосибирска"`}},
		{"у меня аллергия на орехи", []string{`health.allergies.орехи="орехи"`}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			ex := extractOne(t, tc.in)
			var got []string
			for _, c := range ex.Candidates {
				got = append(got, render(c))
				if c.Evidence == "" || !strings.Contains(tc.in, c.Evidence) {
					t.Errorf("%s: evidence %q is not a span of the message", c.Key, c.Evidence)
				}
				if !slices.Equal(c.MessageIDs, []string{"m1"}) {
					t.Errorf("%s: message ids %v", c.Key, c.MessageIDs)
				}
				if c.ValidatedBy != memory.ValidatedUserStated {
					t.Errorf("%s: validated_by %q", c.Key, c.ValidatedBy)
				}
				if c.Confidence <= 0 || c.Confidence > 1 {
					t.Errorf("%s: confidence %v", c.Key, c.Confidence)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if len(ex.Candidates) > 0 && len(ex.Skipped) != 0 {
				t.Errorf("a message with candidates is also skipped: %v", ex.Skipped)
			}
		})
	}
}

// TestRulesNoClaim: what must not become a claim, each with the reason it
// is reported under (nothing vanishes silently).
func TestRulesNoClaim(t *testing.T) {
	cases := []struct{ in, why string }{
		{"I like how you said that", whyConversation},
		{"I love it when you explain things", whyConversation},
		{"I like your idea", whyConversation},
		{"I hate that answer", whyConversation},
		{"I love you", whyConversation},
		{"I'd like to know more about Rome", whyHypothetical},
		{"I would love to visit Japan", whyHypothetical},
		{"do you live in Paris?", whyQuestion},
		{"Do you like mugs", whyQuestion},
		{"Where do you live", whyQuestion},
		{"I live in Paris?", whyQuestion},
		{"if I lived in Rome I'd eat pasta daily", whyHypothetical},
		{"If I were a teacher, I would be strict", whyHypothetical},
		{"When I lived in Rome it was hot", whyHypothetical},
		{"Imagine I live in Rome", whyHypothetical},
		{"I want to live in Rome", whyHypothetical},
		{"I'm planning to move to Berlin", whyHypothetical},
		{"I'm moving to Berlin next year", whyHypothetical},
		{"maybe I like jazz", whyHypothetical},
		{"\"I love cats\" she said", whyQuoted},
		{"She told me “I hate mugs”", whyQuoted},
		{"I'm a bit lost", whyNoOccupation},
		{"I'm a big fan of this", whyConversation},
		{"I like the new version better", whyConversation},
		{"I love the idea", whyConversation},
		{"I'm Canadian", ""},
		{"I'm allergic to meetings lol", whyJoke},
		{"I'm allergic to nothing.", ""},
		{"just kidding, I live in Mars", whyJoke},
		{"I don't like the color of the button", whyConversation},
		{"I'm Anna", ""}, // no greeting: a name or a nationality, unknown
		{"I live at 12 Baker Street", ""},
		{"I'm in Paris right now", ""},
		{"I don't hate mugs", whyVague},
		{"I lived in Paris for a while", whyPast},
		{"I was happy there", whyPast},
		{"what's the weather in Paris", ""},
		{"Tell me about Paris", ""},
		{"He lives in Rome", ""},
		{"The user loves jazz", ""},
		{"I live in fear of deadlines", ""},
		{"call me later", ""},
		{"my name is not important", ""},
		{"I think so", ""},
		{"ok thanks", ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			ex := extractOne(t, tc.in)
			if len(ex.Candidates) != 0 {
				var got []string
				for _, c := range ex.Candidates {
					got = append(got, render(c))
				}
				t.Fatalf("got candidates %q, want none", got)
			}
			if len(ex.Skipped) != 1 || ex.Skipped[0].MessageID != "m1" || ex.Skipped[0].Reason == "" {
				t.Fatalf("skipped = %+v, want m1 with a reason", ex.Skipped)
			}
			if tc.why != "" && ex.Skipped[0].Reason != tc.why {
				t.Errorf("reason %q, want %q", ex.Skipped[0].Reason, tc.why)
			}
		})
	}
}

func TestRulesCategories(t *testing.T) {
	cases := []struct {
		in, key, category    string
		sensitive, transient bool
	}{
		{"I'm allergic to penicillin", "health.allergies.penicillin", "health", true, false},
		{"I'm vegetarian", "diet", "health", true, false},
		{"I have diabetes", "health.conditions.diabetes", "health", true, false},
		{"I'm a priest", "occupation", "religion", true, false},
		{"I'm so tired today", "mood", "mood", false, true},
		{"I feel anxious", "mood", "mood", false, true},
		{"I hate mugs", "dislikes.mugs", "dislike", false, false},
		{"I love mugs", "likes.mugs", "like", false, false},
		{"answer in Russian", "preference.language", "preference", false, false},
		{"I live in Oslo", "home.city", "place", false, false},
		{"my name is Ann", "name", "name", false, false},
		{"my wife Ann is a teacher", "relationship.wife", "relationship", false, false},
	}
	for _, tc := range cases {
		ex := extractOne(t, tc.in)
		if len(ex.Candidates) == 0 {
			t.Errorf("%q: no candidate", tc.in)
			continue
		}
		c := ex.Candidates[0]
		if c.Key != tc.key || c.Category != tc.category {
			t.Errorf("%q: %s (%s), want %s (%s)", tc.in, c.Key, c.Category, tc.key, tc.category)
		}
		if memory.SensitiveCategory(c.Category) != tc.sensitive || memory.TransientCategory(c.Category) != tc.transient {
			t.Errorf("%q: category %q sensitive=%v transient=%v", tc.in, c.Category,
				memory.SensitiveCategory(c.Category), memory.TransientCategory(c.Category))
		}
	}
}

func TestRulesLikeContradictsDislike(t *testing.T) {
	ex := extractOne(t, "I love mugs")
	if got := ex.Candidates[0].Contradicts; !slices.Equal(got, []string{"dislikes.mugs"}) {
		t.Errorf("contradicts %v", got)
	}
	ex = extractOne(t, "my friend hates mugs")
	c := ex.Candidates[0]
	if c.About != "friend" || !slices.Equal(c.Contradicts, []string{"friend.likes.mugs"}) {
		t.Errorf("about %q contradicts %v", c.About, c.Contradicts)
	}
}

func TestRulesValidFrom(t *testing.T) {
	cases := []struct {
		at   time.Time
		in   string
		hint string
		want time.Time
	}{
		{sept1, "I live in Saint Petersburg since May", "since May", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), "I moved to Berlin in May", "in May", time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)},
		{sept1, "I've lived in Tokyo since 2019", "since 2019", time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)},
		{sept1, "я живу в Москве с мая", "с мая", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range cases {
		ex, err := Rules{}.Extract(context.Background(), []memory.Message{{ID: "a", Role: "user", Content: tc.in, At: tc.at}})
		if err != nil || len(ex.Candidates) != 1 {
			t.Fatalf("%q: %v %+v", tc.in, err, ex)
		}
		c := ex.Candidates[0]
		if c.ValidFromHint != tc.hint || c.ValidFrom == nil || !c.ValidFrom.Equal(tc.want) {
			t.Errorf("%q: hint %q from %v, want %q %v", tc.in, c.ValidFromHint, c.ValidFrom, tc.hint, tc.want)
		}
	}
	// Without a message time the hint stays words.
	ex, _ := Rules{}.Extract(context.Background(), []memory.Message{{ID: "a", Role: "user", Content: "I moved to Rome in May"}})
	if c := ex.Candidates[0]; c.ValidFromHint != "in May" || c.ValidFrom != nil {
		t.Errorf("no time: hint %q from %v", c.ValidFromHint, c.ValidFrom)
	}
}

func TestRulesBatch(t *testing.T) {
	msgs := []memory.Message{
		{ID: "s1", Role: "system", Content: "You are a helpful assistant. My name is Bot."},
		{ID: "u1", Role: "user", Content: "Hi, I hate mugs. Answer in Russian."},
		{ID: "a1", Role: "assistant", Content: "I love mugs! I live in Paris."},
		{ID: "t1", Role: "tool", Content: `{"city": "Paris"}`},
		{ID: "u2", Role: "user", Content: "I live in Paris"},
		{ID: "u3", Role: "user", Content: "   "},
		{ID: "u4", Role: "user", Content: "what time is it?"},
		{ID: "u5", Role: "user", Content: "I moved to Lyon"},
		{ID: "u6", Role: "user", Content: "i really hate MUGS"},
		{ID: "u7", Role: "user", Content: "I live in Paris again"},
		{ID: "u8", Role: "user", Content: "No, I meant Marseille"},
	}
	ex, err := Rules{}.Extract(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ex.Candidates {
		got = append(got, render(c)+" "+strings.Join(c.MessageIDs, ","))
	}
	want := []string{
		`dislikes.mugs="mugs" u1,u6`, // merged: same key, same value up to case
		`preference.language="Russian" u1`,
		`home.city="Paris" u2`,
		`home.city="Lyon" u5`,
		`home.city="Paris" u7`, // not merged into u2: Lyon came between
		`home.city="Marseille" correction u8`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	skipped := map[string]string{}
	for _, s := range ex.Skipped {
		skipped[s.MessageID] = s.Reason
	}
	for _, id := range []string{"s1", "a1", "t1", "u3", "u4"} {
		if skipped[id] == "" {
			t.Errorf("%s not reported in Skipped: %v", id, skipped)
		}
	}
	if !strings.Contains(skipped["a1"], "assistant") || skipped["u3"] != "empty message" || skipped["u4"] != whyQuestion {
		t.Errorf("reasons: %v", skipped)
	}
	if len(ex.Skipped) != 5 {
		t.Errorf("skipped %d messages, want 5", len(ex.Skipped))
	}
}

func TestRulesMeantWithoutFact(t *testing.T) {
	ex := extractOne(t, "no, I meant Lyon")
	if len(ex.Candidates) != 0 || len(ex.Skipped) != 1 || !strings.Contains(ex.Skipped[0].Reason, "meant") {
		t.Errorf("%+v", ex)
	}
	// "I meant the other file" is about the chat, even after a fact.
	ex = extractOne(t, "I live in Paris. Sorry, I meant the other file.")
	if len(ex.Candidates) != 1 {
		t.Errorf("%+v", ex.Candidates)
	}
	// Within one message, "I meant" corrects the fact just before it.
	ex = extractOne(t, "I live in Paris. Sorry, I meant Lyon.")
	if len(ex.Candidates) != 2 || render(ex.Candidates[1]) != `home.city="Lyon" correction` {
		t.Errorf("%+v", ex.Candidates)
	}
}

func TestRulesRefusesBadIDs(t *testing.T) {
	for _, msgs := range [][]memory.Message{
		{{ID: "", Role: "user", Content: "I hate mugs"}},
		{{ID: "a", Role: "user", Content: "I hate mugs"}, {ID: "a", Role: "user", Content: "I love tea"}},
	} {
		if _, err := (Rules{}).Extract(context.Background(), msgs); !errors.Is(err, memory.ErrInvalidInput) {
			t.Errorf("%v: err %v, want ErrInvalidInput", msgs, err)
		}
	}
}

func TestRulesContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Rules{}).Extract(ctx, userMsgs("I hate mugs")); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}

func TestRulesValueIsJSON(t *testing.T) {
	ex := extractOne(t, `I love "quoted \ things" and my name is O'Brien`)
	for _, c := range ex.Candidates {
		if !json.Valid(c.Value) {
			t.Errorf("%s: value %s is not JSON", c.Key, c.Value)
		}
	}
	if len(ex.Candidates) != 2 || render(ex.Candidates[1]) != `name="O'Brien"` {
		t.Errorf("%+v", ex.Candidates)
	}
}
