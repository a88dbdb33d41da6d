package giftgenius

import (
	"regexp"
	"slices"
	"strings"
)

// Profile fields, as questions name them.
const (
	FieldRecipient = "recipient"
	FieldInterests = "interests"
	FieldBudget    = "budget"
	FieldRegion    = "region"
	FieldDeadline  = "deadline"
)

var (
	reQuestion = regexp.MustCompile(`[^.!?\n]*\?`)
	askCues    = []struct {
		field string
		re    *regexp.Regexp
	}{
		{FieldRecipient, regexp.MustCompile(`\b(who|whom|recipient|which friend|for whom)\b`)},
		{FieldInterests, regexp.MustCompile(`\b(interest\w*|hobb\w*|into|enjoys?|passions?|likes)\b`)},
		{FieldBudget, regexp.MustCompile(`\b(budget|spend|how much|price range)\b`)},
		{FieldRegion, regexp.MustCompile(`\b(country|countries|region|ship(ped)? to|where|live|lives|address)\b`)},
		{FieldDeadline, regexp.MustCompile(`\b(when|how soon|deadline|how many days|by what date)\b`)},
	}
)

// QuestionsAbout lists the profile fields an answer asks the user about:
// the fields named in its questions (sentences that end with "?"). It reads
// any model's answer, so the demo and the tests can tell whether an agent
// asked again for what it already knew.
func QuestionsAbout(answer string) []string {
	var fields []string
	for _, q := range reQuestion.FindAllString(answer, -1) {
		q = strings.ToLower(q)
		for _, c := range askCues {
			if c.re.MatchString(q) && !slices.Contains(fields, c.field) {
				fields = append(fields, c.field)
			}
		}
	}
	return fields
}
