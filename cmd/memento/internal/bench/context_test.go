package bench

import (
	"context"
	"strconv"
	"testing"
)

// TestRunContextOnSyntheticLocomo: a tiny conversation of our own whose
// answer is in the first session, far from the recent window.
func TestRunContextOnSyntheticLocomo(t *testing.T) {
	var chatter []LocomoTurn
	for i := 1; i <= 200; i++ {
		chatter = append(chatter, LocomoTurn{Speaker: "Bob", DiaID: "D2:" + strconv.Itoa(i), Text: "we talked about the weather and the football results again today"})
	}
	convs := readThroughFile(t, []LocomoConversation{{SampleID: "s1", SpeakerA: "Ann", SpeakerB: "Bob",
		Sessions: []LocomoSession{
			{Number: 1, DateTime: "4:25 pm on 13 May, 2023", Turns: []LocomoTurn{
				{Speaker: "Ann", DiaID: "D1:1", Text: "I adopted a grey parrot called Kiwi last week."},
				{Speaker: "Bob", DiaID: "D1:2", Text: "That is lovely, how is it settling in?"}}},
			{Number: 2, DateTime: "9:00 am on 20 June, 2023", Turns: chatter}},
		QA: []LocomoQA{
			{Question: "What is the name of Ann's parrot?", Evidence: []string{"D1:1"}, Category: 4},
			{Question: "Adversarial", Evidence: []string{}, Category: 5}}}})
	rep, err := RunContext(context.Background(), ContextConfig{Conversations: convs, BudgetTokens: 300})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Questions != 1 || rep.EvidenceInContext != 1 || rep.RecentWindow != 0 {
		t.Fatalf("report = %+v, want the parrot turn found by the builder and not in the recent window", rep)
	}
	if c := rep.ByCategory["4"]; c == nil || c.Questions != 1 {
		t.Fatalf("by category = %+v", rep.ByCategory)
	}
	if rep.MeanContextTokens > 300 {
		t.Fatalf("contexts over budget: mean %v", rep.MeanContextTokens)
	}
}
