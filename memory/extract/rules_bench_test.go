package extract

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
)

// benchCorpus is a mix of what users write: statements, chatter,
// questions, long pastes.
var benchCorpus = []string{
	"Hi! My name is Anna and I live in Saint Petersburg since May.",
	"Please answer in Russian from now on.",
	"I hate mugs, so no mugs as gifts please.",
	"Can you help me plan a trip to Rome next month?",
	"What's the best way to cook salmon?",
	"I'm allergic to peanuts and I don't eat pork.",
	"Actually, I moved to Berlin in May.",
	"my wife Olga loves orchids but my friend hates flowers",
	"I'm so tired today, long day at work.",
	"Thanks, that was helpful!",
	"I work as a software engineer at a small startup called Acme.",
	"I don't live in Paris anymore.",
	"if I lived in Rome I would eat pasta every day",
	"Do you think it will rain tomorrow in London?",
	"Меня зовут Дмитрий, я живу в Москве. Отвечай по-русски.",
	"I like how you explained that, but could you give a shorter version?",
	"My birthday is on the 21st of March and I'm 34 years old.",
	strings.Repeat("Here is the log output I got from the build, it fails at step three with an error about missing modules and I have no idea why. ", 8),
	"I really enjoy hiking, photography and old jazz records.",
	"no, I meant Lyon",
}

// BenchmarkRules times Rules.Extract on one message at a time and reports
// p50/p95 per message and the ratio to a baseline measured in the same run:
// lowercasing and splitting the same message into words (the least any
// text pass costs).
func BenchmarkRules(b *testing.B) {
	msgs := make([]memory.Message, len(benchCorpus))
	for i, s := range benchCorpus {
		msgs[i] = memory.Message{ID: fmt.Sprint(i), Role: "user", Content: s, At: sept1}
	}
	ctx := context.Background()
	var rules, base []time.Duration
	var sink int
	i := 0
	for b.Loop() {
		m := msgs[i%len(msgs)]
		i++
		t0 := time.Now()
		sink += len(strings.Fields(strings.ToLower(m.Content)))
		t1 := time.Now()
		ex, err := Rules{}.Extract(ctx, msgs[(i-1)%len(msgs):(i-1)%len(msgs)+1])
		t2 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		sink += len(ex.Candidates)
		base = append(base, t1.Sub(t0))
		rules = append(rules, t2.Sub(t1))
	}
	_ = sink
	p := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds())
	}
	b.ReportMetric(p(rules, 0.50), "p50-ns/msg")
	b.ReportMetric(p(rules, 0.95), "p95-ns/msg")
	b.ReportMetric(p(base, 0.95), "baseline-p95-ns/msg")
	b.ReportMetric(p(rules, 0.95)/max(p(base, 0.95), 1), "p95-x-baseline")
}

// BenchmarkRulesLarge times one 64 KiB message of adversarial repetition
// (lists, joiners, nested sentiments) against the same tokenising baseline,
// to show the rules stay linear in the message size.
func BenchmarkRulesLarge(b *testing.B) {
	for _, unit := range []string{
		"I love tea and hate coffee and love jazz and hate mugs and ",
		", , , and but I ",
		"I like a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w. ",
		"my friend Anna, my wife Olga, ",
	} {
		text := strings.Repeat(unit, 64<<10/len(unit))
		msgs := []memory.Message{{ID: "1", Role: "user", Content: text}}
		b.Run(fmt.Sprintf("%.12s", unit), func(b *testing.B) {
			var base, rules time.Duration
			for b.Loop() {
				t0 := time.Now()
				_ = len(strings.Fields(strings.ToLower(text)))
				t1 := time.Now()
				if _, err := (Rules{}).Extract(context.Background(), msgs); err != nil {
					b.Fatal(err)
				}
				base += t1.Sub(t0)
				rules += time.Since(t1)
			}
			b.ReportMetric(float64(rules.Microseconds())/float64(b.N), "us/64KiB")
			b.ReportMetric(float64(rules)/float64(max(base, 1)), "x-baseline")
		})
	}
}
