package contextbuild_test

import (
	"context"
	"math/rand"
	"slices"
	"strconv"
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
	f := newFixture(t)
	firstThree := func(texts []string, query string) []string {
		return f.entryOrder(t, f.runWith(t, texts), query, 3)
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

// entryOrder returns the first n older turns to enter the context as the
// budget grows, in the order they enter.
func (f *fixture) entryOrder(t *testing.T, runID, query string, n int) []string {
	t.Helper()
	var order []string
	for budget := 100; budget < 3000 && len(order) < n; budget += 2 {
		res, err := f.b.Build(context.Background(), tenant, contextbuild.Request{Model: "gpt-4o", BudgetTokens: budget, RunID: runID, Query: query})
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

// decoys makes n filler turns from at on match the query (they hold words)
// better than a long turn that mentions it once, and cost more tokens than
// any turn a test watches, so no budget holds a watched turn without one
// of them unless a rule brings it first.
func decoys(texts []string, at, n int, words string) []string {
	var seqs []string
	for i := at; i < at+n; i++ {
		texts[i] += " " + words + " " + texts[i]
		seqs = append(seqs, "seq:"+strconv.Itoa(i+2))
	}
	return seqs
}

// before tells whether every one of want enters (order, from entryOrder)
// before any of others.
func before(order, want, others []string) bool {
	for _, s := range order {
		if slices.Contains(others, s) {
			return false
		}
		want = slices.DeleteFunc(slices.Clone(want), func(w string) bool { return w == s })
		if len(want) == 0 {
			return true
		}
	}
	return false
}

// TestAnswerBringsItsQuestion: an answer that matches the query brings the
// turn before it when that turn asks about the query, ahead of turns that
// match the query better than the question does.
func TestAnswerBringsItsQuestion(t *testing.T) {
	f := newFixture(t)
	texts := fillerTexts(300, 16)
	texts[60] = texts[60] + " How did the course go?"
	texts[61] = "Murano was unforgettable, the glassblowing was hard."
	others := decoys(texts, 150, 30, "I enjoyed the course.")
	id := f.runWith(t, texts)
	if o := f.entryOrder(t, id, "Did Bob enjoy the glassblowing course in Murano?", 10); !before(o, []string{"seq:63", "seq:62"}, others) {
		t.Fatalf("the answer (seq:63) did not bring its question (seq:62) ahead of the decoys (seq:152-181): %v", o)
	}
}

// TestBestHitBringsFollowUp: the best hit, followed by a question about
// it, brings that question and the answer after it, ahead of turns that
// match the query, though neither shares a word with it.
func TestBestHitBringsFollowUp(t *testing.T) {
	f := newFixture(t)
	texts := fillerTexts(300, 17)
	texts[60] = "I finally took the glassblowing course in Murano."
	texts[61] = "Oh wow, what did you make there? " + texts[61]
	texts[62] = "A blue vase with a twisted stem. " + texts[62]
	others := decoys(texts, 150, 30, "I enjoyed the glassblowing course.")
	id := f.runWith(t, texts)
	if o := f.entryOrder(t, id, "What did Ann make at the glassblowing course in Murano?", 10); !before(o, []string{"seq:62", "seq:63", "seq:64"}, others) {
		t.Fatalf("the best hit (seq:62) did not bring the question after it and its answer (seq:63, seq:64) ahead of the decoys (seq:152-181): %v", o)
	}
}
