package contextbuild_test

import (
	"context"
	"math/rand"
	"slices"
	"testing"

	"github.com/mementohq/memento/contextbuild"
)

// fillerTexts is n turns of random words that share none of the words the
// tests below ask about.
func fillerTexts(n int, seed int64) []string {
	r := rand.New(rand.NewSource(seed))
	texts := make([]string, n)
	for i := range texts {
		texts[i] = randText(r, 20)
	}
	return texts
}

func historySources(t *testing.T, res contextbuild.Result) []string {
	t.Helper()
	for _, p := range res.Accounting.Parts {
		if p.Kind == contextbuild.KindHistory {
			return p.SourceIDs
		}
	}
	return nil
}

// firstOlder returns the older history of the smallest budget that holds
// any: the best-ranked turns that fit.
func (f *fixture) firstOlder(t *testing.T, runID, query string) []string {
	t.Helper()
	for budget := 200; budget < 1500; budget += 2 {
		res, err := f.b.Build(context.Background(), tenant, contextbuild.Request{Model: "gpt-4o", BudgetTokens: budget, RunID: runID, Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if src := historySources(t, res); len(src) > 0 {
			return src
		}
	}
	t.Fatalf("no budget in [200, 1500) held an older turn for %q", query)
	return nil
}

// TestNamedSpeakerRanksFirst: when a question names one of the speakers,
// that speaker's matching turn wins the one older slot the budget has,
// although another speaker's turn matches the question's words more often.
// runWith gives even turns to Ann and odd turns to Bob; turn i is seq i+2.
func TestNamedSpeakerRanksFirst(t *testing.T) {
	f := newFixture(t)
	texts := fillerTexts(300, 11)
	texts[20] = "Bob, ukulele lessons: my ukulele teacher says the ukulele of Bob sounds better"
	// Bob's turn is long, so it ranks below Ann's by its words alone.
	texts[41] = "I bought a ukulele. " + texts[41]
	id := f.runWith(t, texts)
	if src := f.firstOlder(t, id, "What ukulele did Bob buy?"); !slices.Contains(src, "seq:43") {
		t.Fatalf("the first older turn chosen is %v, not Bob's (seq:43)", src)
	}
}

// TestAnswerComesWithItsQuestion: a matching question brings the turn after
// it (its answer) among the first three turns to enter the older history as
// the budget grows; a matching statement does not bring the reaction after
// it so early. The turns after are long, so they rank low on their own.
func TestAnswerComesWithItsQuestion(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	firstThree := func(texts []string, query string) []string {
		id := f.runWith(t, texts)
		var order []string
		for budget := 100; budget < 1500 && len(order) < 3; budget += 2 {
			res, err := f.b.Build(ctx, tenant, contextbuild.Request{Model: "gpt-4o", BudgetTokens: budget, RunID: id, Query: query})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range historySources(t, res) {
				if !slices.Contains(order, s) {
					order = append(order, s)
				}
			}
		}
		return order
	}
	asked := fillerTexts(300, 12)
	asked[30] = "Where did you go hiking last spring?"
	asked[31] = "Up in the Tatra, three days. " + asked[31]
	if o := firstThree(asked, "hiking last spring"); !slices.Contains(o, "seq:32") || !slices.Contains(o, "seq:33") {
		t.Fatalf("the question did not bring its answer early: %v", o)
	}
	told := fillerTexts(300, 13)
	told[80] = "I went hiking last spring."
	told[81] = "Nice! " + told[81]
	if o := firstThree(told, "hiking last spring"); !slices.Contains(o, "seq:82") || slices.Contains(o, "seq:83") {
		t.Fatalf("the statement is missing or brought the reaction after it early: %v", o)
	}
}

// TestDateIsSearched: a question that names a month finds the turn said
// then, although the turn's words do not name it.
func TestDateIsSearched(t *testing.T) {
	f := newFixture(t)
	texts := fillerTexts(300, 14)
	dates := map[int]string{}
	for i := range texts {
		dates[i] = "3 March 2024"
	}
	// The same words twice: only the date tells them apart.
	texts[40] = "We planted the apple trees."
	texts[200] = texts[40]
	dates[40] = "9 October 2024"
	id := f.runWithDates(t, texts, dates)
	if src := f.firstOlder(t, id, "Which apple trees were planted in October?"); !slices.Contains(src, "seq:42") || slices.Contains(src, "seq:202") {
		t.Fatalf("the first older turn is %v, not the one of October (seq:42) alone", src)
	}
}

// TestQuestionSpelledOtherwise: a question that writes apart what the
// history wrote together, or misspells it, still finds the turn.
func TestQuestionSpelledOtherwise(t *testing.T) {
	f := newFixture(t)
	texts := fillerTexts(300, 15)
	texts[50] = "The roadtrip to the fjords was long."
	texts[120] = "She performed at the fundraiser."
	id := f.runWith(t, texts)
	if src := f.firstOlder(t, id, "Where did the road trip go?"); !slices.Contains(src, "seq:52") {
		t.Fatalf("the first older turn is %v, not the roadtrip (seq:52)", src)
	}
	if src := f.firstOlder(t, id, "Who preformed at the fundriaser?"); !slices.Contains(src, "seq:122") {
		t.Fatalf("the first older turn is %v, not the fundraiser (seq:122)", src)
	}
}
