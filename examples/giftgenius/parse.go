package giftgenius

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Facts are what one user message says, as the scripted planner reads it
// (simple English patterns; a real model reads the message itself).
type Facts struct {
	Recipient string
	Relation  string
	Interests []string
	BudgetEUR int
	// BiggerBudget: the message raises the budget without naming an
	// amount ("a bigger budget this time").
	BiggerBudget bool
	Region       string
	Days         int
	// Same: the message refers to the recipient of before ("same friend").
	Same bool
}

// Lasting reports whether the message states something kept long term.
func (f Facts) Lasting() bool {
	return f.Recipient != "" || len(f.Interests) > 0 || f.BudgetEUR > 0 || f.Region != ""
}

const relations = `best friend|friend|sister|brother|mum|mom|mother|dad|father|colleague|partner|wife|husband|son|daughter|aunt|uncle|cousin|niece|nephew|grandma|grandpa|boss|neighbour|neighbor`

var (
	reRelName = regexp.MustCompile(`(?i:\b(?:for|to)\s+(?:my\s+|our\s+)?(` + relations + `)),?\s+([A-Z][a-z]+)\b`)
	reForName = regexp.MustCompile(`(?i:\bgift\s+for)\s+([A-Z][a-z]+)\b`)
	reSame    = regexp.MustCompile(`(?i)\b(?:same\s+(?:` + relations + `|person|recipient|one)|(?:her|him|them)\s+again|as\s+last\s+time)\b`)
	reBudget  = []*regexp.Regexp{
		regexp.MustCompile(`(?i)(?:€|\beur\s*)\s?(\d{1,6})\b`),
		regexp.MustCompile(`(?i)\b(\d{1,6})\s?(?:€|eur\b|euros?\b)`),
		regexp.MustCompile(`(?i)\bbudget\s+(?:is\s+|of\s+)?(?:about\s+|around\s+)?(\d{1,6})\b`),
		regexp.MustCompile(`(?i)\bup\s+to\s+(\d{1,6})\b`),
	}
	reBigger  = regexp.MustCompile(`(?i)\b(?:bigger|higher|larger|more|increased?)\s+budget\b|\bbudget\s+(?:is\s+)?(?:bigger|higher|larger)\b|\bspend\s+more\b`)
	reDays    = regexp.MustCompile(`(?i)\b(?:within|in|under)\s+(\d{1,3})\s+days?\b`)
	reWeeks   = regexp.MustCompile(`(?i)\b(?:within|in|under)\s+(a|one|two|\d)\s+weeks?\b`)
	reTmrw    = regexp.MustCompile(`(?i)\bby\s+tomorrow\b`)
	reWord    = regexp.MustCompile(`[A-Za-z]+(?:\s+games)?`)
	reLetters = regexp.MustCompile(`[^A-Za-z]+`)
	reCodes   = regexp.MustCompile(`\b(UK|USA|U\.S\.A?\.?)`)
)

// ParseFacts reads what a message says about the recipient.
func ParseFacts(text string) Facts {
	var f Facts
	if m := reRelName.FindStringSubmatch(text); m != nil {
		f.Relation, f.Recipient = strings.ToLower(m[1]), m[2]
	} else if m := reForName.FindStringSubmatch(text); m != nil {
		f.Recipient = m[1]
	}
	f.Same = reSame.MatchString(text)
	for _, re := range reBudget {
		if m := re.FindStringSubmatch(text); m != nil {
			f.BudgetEUR, _ = strconv.Atoi(m[1])
			break
		}
	}
	f.BiggerBudget = f.BudgetEUR == 0 && reBigger.MatchString(text)
	f.Region = findRegion(text)
	if m := reDays.FindStringSubmatch(text); m != nil {
		f.Days, _ = strconv.Atoi(m[1])
	} else if m := reWeeks.FindStringSubmatch(text); m != nil {
		n := map[string]int{"a": 1, "one": 1, "two": 2}[strings.ToLower(m[1])]
		if n == 0 {
			n, _ = strconv.Atoi(m[1])
		}
		f.Days = 7 * n
	} else if reTmrw.MatchString(text) {
		f.Days = 1
	}
	lower := strings.ToLower(text)
	for _, w := range reWord.FindAllString(lower, -1) {
		t := NormalizeInterest(w)
		if t == "" && strings.HasSuffix(w, " games") {
			t = NormalizeInterest(strings.TrimSuffix(w, " games"))
		}
		if t != "" && !slices.Contains(f.Interests, t) {
			f.Interests = append(f.Interests, t)
		}
	}
	return f
}

// findRegion finds a country the catalogue ships to, by name or code word
// (UK, USA: upper case only, so "us" the pronoun is not America).
func findRegion(text string) string {
	lower := " " + strings.ToLower(reLetters.ReplaceAllString(text, " ")) + " "
	best, at := "", -1
	for code, names := range Regions {
		for _, n := range names {
			if n == "uk" || n == "usa" {
				continue
			}
			if i := strings.Index(lower, " "+n+" "); i >= 0 && (at < 0 || i < at) {
				best, at = code, i
			}
		}
	}
	if best != "" {
		return best
	}
	for _, w := range reCodes.FindAllString(text, 1) {
		if w == "UK" {
			return "GB"
		}
		return "US"
	}
	return ""
}

var (
	reOrdinal = regexp.MustCompile(`(?i)\b(first|second|third|1st|2nd|3rd)\b|\b(?:number|option|no\.?|#)\s*([1-9])\b|^\s*([1-9])\s*[.!]?\s*$`)
	reID      = regexp.MustCompile(`\bp\d{2}\b`)
	// reListed is an option line of the planner's own answers.
	reListed = regexp.MustCompile(`(?m)^(\d+)\. (.+) — \d+ EUR \((p\d{2})\)$`)
)

// ParseChoice finds which of the offered ids a message picks: by id, by
// position ("the second one") or by the name shown in options (name -> id).
func ParseChoice(text string, offered []string, names map[string]string) (string, bool) {
	if m := reID.FindString(text); m != "" && slices.Contains(offered, m) {
		return m, true
	}
	lower := strings.ToLower(text)
	for name, id := range names {
		if slices.Contains(offered, id) && strings.Contains(lower, strings.ToLower(name)) {
			return id, true
		}
	}
	if m := reOrdinal.FindStringSubmatch(text); m != nil {
		n := 0
		switch strings.ToLower(m[1]) {
		case "first", "1st":
			n = 1
		case "second", "2nd":
			n = 2
		case "third", "3rd":
			n = 3
		}
		for _, g := range m[2:] {
			if g != "" {
				n, _ = strconv.Atoi(g)
			}
		}
		if n >= 1 && n <= len(offered) {
			return offered[n-1], true
		}
	}
	return "", false
}

// listedOptions reads the options an answer of the planner listed, in order.
func listedOptions(answer string) (ids []string, names map[string]string) {
	names = map[string]string{}
	for _, m := range reListed.FindAllStringSubmatch(answer, -1) {
		ids = append(ids, m[3])
		names[m[2]] = m[3]
	}
	return ids, names
}
