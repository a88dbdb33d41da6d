package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// synthLocomo is a tiny conversation in the LoCoMo layout: the answer to
// the question is in the first session, far from the recent window.
const synthLocomo = `[{"sample_id":"s1","conversation":{"speaker_a":"Ann","speaker_b":"Bob",
"session_1_date_time":"2:47 pm on 11 May, 2023","session_1":[
 {"speaker":"Ann","dia_id":"D1:1","text":"I adopted a grey parrot called Kiwi last week."},
 {"speaker":"Bob","dia_id":"D1:2","text":"That is lovely, how is it settling in?"}],
"session_2_date_time":"9:00 am on 20 June, 2023","session_2":[` + `%s` + `]},
"qa":[{"question":"What is the name of Ann's parrot?","answer":"Kiwi","evidence":["D1:1"],"category":4},
      {"question":"Adversarial","evidence":[],"category":5}]}]`

func TestRunContextOnSyntheticLocomo(t *testing.T) {
	var turns []string
	for i := 1; i <= 200; i++ {
		turns = append(turns, `{"speaker":"Bob","dia_id":"D2:`+strconv.Itoa(i)+`","text":"we talked about the weather and the football results again today"}`)
	}
	data := strings.Replace(synthLocomo, "%s", strings.Join(turns, ","), 1)
	convs, err := ReadLocomo(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
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
