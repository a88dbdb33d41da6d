package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mementohq/memento/memory"
)

// Rules is the offline extractor: it reads explicit first-person statements
// in user messages ("my name is Anna", "answer in Russian", "I hate mugs",
// "I don't live in Paris anymore") and nothing else. A clause it cannot read
// with certainty yields nothing, and every message that yields nothing is
// reported in Skipped with the reason. The zero value is ready to use.
//
// Keys it writes (lowercase, dotted): name, preferred_name, family_name,
// preference.language, language.native, languages.spoken.<lang>,
// home.city, origin, birthplace, birthday, birth_year, age,
// likes.<slug>, dislikes.<slug>, favorite.<thing>, occupation,
// work.employer, diet, diet.avoids.<slug>, health.allergies.<slug>,
// health.conditions.<slug>, relationship.<role>[.<name>], mood, and for
// facts about someone else the same keys under <role>[.<name>]. ("my friend
// hates mugs" -> friend.dislikes.mugs, About "friend").
type Rules struct{}

// RulesName is the identity recorded in provenance; bump the version when
// the rules change what they extract.
const RulesName = "rules@1"

// Name implements memory.Extractor.
func (Rules) Name() string { return RulesName }

// Confidence of the rules by how sure a pattern is.
const (
	confExplicit = 0.9  // "my name is", "I live in", "answer in"
	confGuarded  = 0.8  // an occupation or a place the guard let through
	confLoose    = 0.7  // lower-case names, "I'm Anna", "I meant X"
	confMood     = 0.75 // a mood the user stated (transient: refused by policy)
)

// fact is what a clause yields before it becomes a candidate.
type fact struct {
	key      string
	value    json.RawMessage
	text     string
	category string
	kind     string
	conf     float64
	retracts json.RawMessage
	contra   []string
	hint     string
	from     *time.Time
	about    string
	meant    string // "I meant X": corrects the batch's last fact; key is filled later
	ev       [2]int // evidence span in the message
}

// Extract implements memory.Extractor.
func (r Rules) Extract(ctx context.Context, msgs []memory.Message) (memory.Extraction, error) {
	var ex memory.Extraction
	if err := checkMessages(msgs); err != nil {
		return ex, fmt.Errorf("rules extractor: %w", err)
	}
	var p parser
	b := batch{ex: &ex, latest: map[string]int{}, last: -1}
	for i, m := range msgs {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return ex, fmt.Errorf("rules extractor: %w", err)
			}
		}
		role := strings.ToLower(strings.TrimSpace(m.Role))
		if role != "user" {
			ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID,
				Reason: fmt.Sprintf("role %q: the rule extractor reads only what the user says", m.Role)})
			continue
		}
		if strings.TrimSpace(m.Content) == "" {
			ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID, Reason: "empty message"})
			continue
		}
		facts, reason := p.message(m.Content, m.At)
		added := 0
		for _, f := range facts {
			if f.meant != "" {
				if !b.resolveMeant(&f) {
					if reason == "" {
						reason = "\"I meant ...\" with no earlier fact in this batch to correct"
					}
					continue
				}
			}
			b.add(f, m)
			added++
		}
		if added == 0 {
			if reason == "" {
				reason = "no explicit first-person statement the rules can read"
			}
			ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID, Reason: reason})
		}
	}
	return ex, nil
}

// checkMessages refuses what would make a candidate's message ids ambiguous.
func checkMessages(msgs []memory.Message) error {
	seen := make(map[string]struct{}, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			return fmt.Errorf("message %d has no id: %w", i, memory.ErrInvalidInput)
		}
		if _, dup := seen[m.ID]; dup {
			return fmt.Errorf("message id %q appears twice: %w", m.ID, memory.ErrInvalidInput)
		}
		seen[m.ID] = struct{}{}
	}
	return nil
}

// batch collects candidates, merging a repeat of the same fact into the
// candidate already made for it.
type batch struct {
	ex     *memory.Extraction
	latest map[string]int // key -> index of its latest candidate
	last   int            // index of the latest candidate with a string value
}

func (b *batch) resolveMeant(f *fact) bool {
	if b.last < 0 {
		return false
	}
	prev := b.ex.Candidates[b.last]
	f.key, f.category, f.about = prev.Key, prev.Category, prev.About
	f.value = jsonString(f.meant)
	f.text = memory.RenderText(f.key, f.value)
	f.kind = memory.KindCorrection
	f.conf = confLoose
	return true
}

func (b *batch) add(f fact, m memory.Message) {
	text := f.text
	if text == "" {
		text = memory.RenderText(f.key, f.value)
	}
	b.addCandidate(memory.Candidate{
		Key: f.key, Value: f.value, Text: text, Category: f.category, Kind: f.kind,
		ValidatedBy: memory.ValidatedUserStated, Confidence: f.conf,
		MessageIDs: []string{m.ID}, Evidence: strings.TrimSpace(m.Content[f.ev[0]:f.ev[1]]),
		Retracts: f.retracts, Contradicts: f.contra, ValidFromHint: f.hint, ValidFrom: f.from,
		About: f.about,
	})
}

// addCandidate appends c, or merges it into the latest candidate of its key
// when that one says the same. Only the latest candidate of a key is a
// duplicate: "Paris", "Lyon", "Paris" again is two moves, not one fact seen
// twice.
func (b *batch) addCandidate(c memory.Candidate) {
	k := c.Namespace + "\x00" + c.Key
	if i, ok := b.latest[k]; ok {
		prev := &b.ex.Candidates[i]
		if bytesEqualJSON(prev.Value, c.Value) && prev.ValidatedBy == c.ValidatedBy {
			for _, id := range c.MessageIDs {
				if !slices.Contains(prev.MessageIDs, id) {
					prev.MessageIDs = append(prev.MessageIDs, id)
				}
			}
			if c.Kind == memory.KindCorrection {
				prev.Kind = memory.KindCorrection
			}
			prev.Confidence = max(prev.Confidence, c.Confidence)
			if prev.ValidFromHint == "" && c.ValidFromHint != "" {
				prev.ValidFromHint, prev.ValidFrom = c.ValidFromHint, c.ValidFrom
			}
			return
		}
	}
	b.ex.Candidates = append(b.ex.Candidates, c)
	i := len(b.ex.Candidates) - 1
	b.latest[k] = i
	if len(c.Value) > 0 && c.Value[0] == '"' {
		b.last = i
	}
}

// bytesEqualJSON compares values as the store does: spacing and string case do not matter.
func bytesEqualJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	return memory.ValueDigest("", "", a) == memory.ValueDigest("", "", b)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

var jsonNull = json.RawMessage("null")

// parser holds buffers reused across messages of one Extract call.
type parser struct {
	toks []token
	sens []sentence
	cls  [][]token
	text string
	at   time.Time
	// allLower: the user types without capitals, so a place needs none.
	allLower bool
	// greeted: the message opened with a greeting, so "I'm Anna" is an introduction.
	greeted bool
}

// message reads one user message: its facts, or why it has none.
func (p *parser) message(text string, at time.Time) ([]fact, string) {
	p.text, p.at = text, at
	p.toks = tokenize(text, p.toks[:0])
	p.sens = sentences(p.toks, p.sens[:0])
	p.allLower = strings.ToLower(text) == text
	p.greeted = false
	var facts []fact
	reason := ""
	for _, s := range p.sens {
		if slices.ContainsFunc(s.t, func(tk token) bool { return jokes[tk.w] }) {
			if reason == "" {
				reason = whyJoke
			}
			continue
		}
		p.cls = clauses(s.t, p.cls[:0])
		for _, ct := range p.cls {
			c := &clause{p: p, t: ct, question: s.question}
			fs, why := c.parse()
			for i := range fs {
				fs[i].ev = [2]int{ct[0].s, ct[len(ct)-1].e}
			}
			facts = append(facts, fs...)
			if len(fs) == 0 && why != "" && reason == "" {
				reason = why
			}
		}
	}
	return facts, reason
}

// clause is a cursor over one clause's tokens.
type clause struct {
	p          *parser
	t          []token
	i          int
	question   bool
	correction bool
	hasQuote   bool
	anymore    int8 // 0 not read yet, 1 yes, 2 no
	items      int  // list items read so far: a clause holds at most maxItems
}

// maxItems bounds the list of one clause ("I like a, b, c, ..."): a longer
// one is a paste, not a statement of tastes.
const maxItems = 20

func (c *clause) done() bool { return c.i >= len(c.t) }

// word is the token at i+k when it is a word, else "".
func (c *clause) word(k int) string {
	if j := c.i + k; j < len(c.t) && c.t[j].kind != tQuote {
		return c.t[j].w
	}
	return ""
}

func (c *clause) at(ws ...string) bool {
	w := c.word(0)
	return w != "" && slices.Contains(ws, w)
}

func (c *clause) eat(ws ...string) bool {
	if c.at(ws...) {
		c.i++
		return true
	}
	return false
}

func (c *clause) eatSeq(ws ...string) bool {
	for k, w := range ws {
		if c.word(k) != w {
			return false
		}
	}
	c.i += len(ws)
	return true
}

const (
	whyQuestion     = "a question, not a statement"
	whyHypothetical = "a hypothetical, wish or plan, not a statement of fact"
	whyQuoted       = "quoted speech, not the user's own statement"
	whyConversation = "about the conversation, not a lasting taste"
	whyPast         = "about the past, not a current fact"
	whyNoOccupation = "\"I'm a ...\" with no known occupation"
	whyTooLong      = "the object is too long to be one narrow claim"
	whyVague        = "a negated dislike says nothing firm"
	whyJoke         = "said as a joke"
)

// parse reads the clause: its facts, or why it has none ("" when nothing was recognised at all).
func (c *clause) parse() ([]fact, string) {
	for _, tk := range c.t {
		if tk.kind == tQuote {
			c.hasQuote = true
		}
	}
	c.skipOpeners()
	if c.done() {
		return nil, ""
	}
	if c.t[c.i].kind == tQuote {
		return nil, whyQuoted
	}

	// A polite request is a question in form only: "could you answer in Russian?"
	if fs := c.languageRequest(); fs != nil {
		return fs, ""
	}
	if c.question {
		return nil, whyQuestion
	}
	w := c.word(0)
	switch w {
	case "do", "does", "did", "are", "is", "can", "could", "would", "will", "should", "shall",
		"what", "where", "who", "why", "how", "which", "whose", "whom":
		return nil, whyQuestion
	case "when", "once", "after", "before":
		return nil, whyHypothetical
	}
	if hypotheticals[w] {
		return nil, whyHypothetical
	}
	var fs []fact
	why := ""
	switch {
	case w == "i":
		c.i++
		fs, why = c.predicate("", "", true)
	case w == "my":
		c.i++
		fs, why = c.possessive()
	case w == "я":
		c.i++
		fs, why = c.russianSelf()
	case c.eatSeq("меня", "зовут"):
		fs = c.name("name", confExplicit)
	case c.eatSeq("зовите", "меня"):
		fs = c.name("preferred_name", confExplicit)
	case c.eatSeq("у", "меня", "аллергия", "на"):
		fs, why = c.allergy("", "")
	case c.eatSeq("call", "me") || c.eatSeq("you", "can", "call", "me") || c.eatSeq("you", "may", "call", "me"):
		fs = c.name("preferred_name", confExplicit)
	}
	if len(fs) == 0 && why == "" && c.hasQuote {
		why = whyQuoted
	}
	return fs, why
}

// skipOpeners skips greetings, fillers and punctuation at the start and
// notes a correction marker ("actually", "no, ...", "sorry").
func (c *clause) skipOpeners() {
	for !c.done() {
		tk := c.t[c.i]
		switch {
		case tk.kind == tPunct:
			c.i++
		case correctionMarkers[tk.w] && !(tk.w == "no" && c.word(1) == "longer"):
			c.correction = true
			c.i++
		case c.eatSeq("by", "the", "way"), c.eatSeq("from", "now", "on"), c.eatSeq("going", "forward"),
			c.eatSeq("in", "the", "future"), c.eatSeq("to", "be", "clear"), c.eatSeq("for", "the", "record"),
			c.eatSeq("just", "so", "you", "know"), c.eatSeq("fun", "fact"), c.eatSeq("as", "of", "now"),
			c.eatSeq("let", "me", "correct", "myself"), c.eatSeq("i", "mean", ","), c.eatSeq("to", "clarify"),
			c.eatSeq("с", "этого", "момента"), c.eatSeq("впредь"):
			if c.t[c.i-1].w == "correct" || c.t[c.i-1].w == "clarify" || c.t[c.i-1].w == "mean" {
				c.correction = true
			}
		case fillers[tk.w] && tk.kind == tWord:
			if greetings[tk.w] {
				c.p.greeted = true
			}
			c.i++
		default:
			return
		}
	}
}

// languageRequest reads "answer in Russian", "could you reply in German?",
// "I want you to respond in French", "отвечай по-русски".
func (c *clause) languageRequest() []fact {
	start := c.i
	// The polite and indirect forms.
	_ = c.eatSeq("can", "you") || c.eatSeq("could", "you") || c.eatSeq("would", "you") || c.eatSeq("will", "you")
	c.eat("mind")
	c.eatSeq("i", "want", "you", "to")
	c.eatSeq("i", "need", "you", "to")
	c.eatSeq("i", "would", "like", "you", "to")
	c.eatSeq("i", "would", "prefer", "you", "to")
	c.eatSeq("i", "prefer", "you", "to")
	c.eatSeq("let", "us")
	c.eat("please", "always", "only", "kindly", "just")
	verb := c.word(0)
	switch verb {
	case "answer", "answering", "reply", "replying", "respond", "responding", "write", "writing",
		"speak", "speaking", "talk", "talking", "communicate", "chat", "switch", "use", "continue",
		"отвечай", "отвечайте", "ответь", "ответьте", "пиши", "пишите", "говори", "говорите",
		"общайся", "общайтесь", "давай":
	default:
		c.i = start
		return nil
	}
	c.i++
	for c.eat("to", "me", "with", "back", "only", "always", "please", "from", "now", "on",
		"мне", "со", "мной", "только", "всегда", "пожалуйста", "говорить", "общаться", "на") {
	}
	c.eat("in", "using", "into", "to")
	c.eat("the")
	lang, ok := languages[c.word(0)]
	if !ok {
		c.i = start
		return nil
	}
	c.i++
	return []fact{c.lang("preference.language", lang, memory.KindStatement)}
}

func (c *clause) lang(key, lang, kind string) fact {
	if c.correction {
		kind = memory.KindCorrection
	}
	cat := "preference"
	if key != "preference.language" {
		cat = "language"
	}
	return fact{key: key, value: jsonString(lang), category: cat, kind: kind, conf: confExplicit}
}

// mods are the negation, cessation and modality read before a verb.
type mods struct {
	neg, cease bool
}

// readMods reads "not", "no longer", "used to", "don't", adverbs; it
// returns a reason when a modal makes the clause no statement.
func (c *clause) readMods(m *mods) string {
	for !c.done() {
		switch {
		case c.eatSeq("no", "longer"), c.eatSeq("used", "to"), c.eatSeq("больше", "не"):
			m.cease = true
		case c.eatSeq("do", "not"), c.eatSeq("does", "not"), c.eatSeq("did", "not"):
			m.neg = true
		case c.eat("not", "never", "не"):
			m.neg = true
		case c.at("would", "will", "could", "might", "should", "may", "must", "shall", "бы"):
			if c.word(1) == "prefer" {
				c.i++
				continue
			}
			return whyHypothetical
		case c.at("want", "wanna", "hope", "plan", "planning", "going", "gonna", "wish", "dream", "intend", "need"):
			return whyHypothetical
		case adverbs[c.word(0)] && !(c.word(0) == "do" && c.word(1) == "not"):
			if c.word(0) == "actually" {
				c.correction = true
			}
			c.i++
		default:
			return ""
		}
	}
	return ""
}

// predicate reads what follows a subject: "I" (self) or "my wife" (scope
// "wife", about "wife"). self allows the first-person-only patterns.
func (c *clause) predicate(scope, about string, self bool) ([]fact, string) {
	var m mods
	if why := c.readMods(&m); why != "" {
		return nil, why
	}
	w := c.word(0)
	switch {
	case likeVerbs[w] || dislikeVerbs[w]:
		c.i++
		return c.sentiment(scope, about, likeVerbs[w], m)
	case w == "can" && c.word(1) == "not" && (c.word(2) == "stand" || c.word(2) == "bear" || c.word(2) == "tolerate"):
		c.i += 3
		return c.sentiment(scope, about, false, m)
	case w == "am" || w == "is" || w == "are" || w == "'s":
		c.i++
		return c.be(scope, about, self, m)
	case w == "live" || w == "lives" || w == "reside" || w == "resides":
		c.i++
		// Not "at": an address is raw personal data, not a narrow claim.
		if !c.eat("in") {
			return nil, ""
		}
		return c.place(scope, about, "home.city", m)
	case w == "moved" || w == "relocated":
		c.i++
		c.eat("back")
		if !c.eat("to", "into") {
			return nil, ""
		}
		return c.place(scope, about, "home.city", m)
	case w == "have" || w == "has" || w == "'ve":
		c.i++
		return c.have(scope, about, self, m)
	case (w == "come" || w == "comes") && c.word(1) == "from":
		c.i += 2
		return c.place(scope, about, "origin", m)
	case w == "grew" && c.word(1) == "up" && c.word(2) == "in":
		c.i += 3
		return c.place(scope, about, "origin", m)
	case w == "work" || w == "works":
		c.i++
		return c.work(scope, about, m)
	case w == "speak" || w == "speaks":
		c.i++
		var fs []fact
		for !m.neg {
			c.eat("fluent", "some", "a", "little", "bit", "of")
			lang, ok := languages[c.word(0)]
			if !ok {
				break
			}
			c.i++
			f := c.lang(scoped(scope, "languages.spoken."+slug(lang)), lang, memory.KindStatement)
			f.about = about
			fs = append(fs, f)
			if !c.eat(",", "and", "&") {
				break
			}
			c.eat("and")
		}
		return c.finish(fs, m, nil)
	case (w == "prefer" || w == "prefers") && self:
		c.i++
		c.eat("answers", "replies", "responses", "it", "that", "you", "to")
		c.eat("speak", "talk", "write", "answer", "use", "speaking", "talking", "writing", "in", "using")
		c.eat("in")
		if lang, ok := languages[c.word(0)]; ok && !m.neg {
			c.i++
			return c.finish([]fact{c.lang("preference.language", lang, memory.KindStatement)}, m, nil)
		}
		return nil, ""
	case w == "feel" || w == "feels":
		c.i++
		return c.mood(scope, about, m)
	case w == "was" || w == "were":
		c.i++
		if c.eat("born") {
			return c.born(scope, about)
		}
		return nil, whyPast
	case (w == "eat" || w == "eats" || w == "drink" || w == "drinks") && (m.neg || m.cease):
		c.i++
		return c.avoid(scope, about, m)
	case (w == "meant" || w == "mean") && self:
		c.i++
		// "I meant the other file" points at the conversation, not at a fact.
		if badObjects[c.word(0)] || c.at("the", "a", "an", "to", "that") {
			return nil, ""
		}
		s, e, n, ok := c.object(5, stopWords)
		if !ok || n == 0 {
			return nil, ""
		}
		return []fact{{meant: c.p.text[s:e]}}, ""
	case w == "go" && c.word(1) == "by" && self:
		c.i += 2
		return c.name("preferred_name", confExplicit), ""
	case w == "lived" || w == "liked" || w == "loved" || w == "hated" || w == "worked" || w == "had":
		return nil, whyPast
	}
	return nil, ""
}

// finish applies the trailer ("anymore", "since May") and the clause's
// correction marker to facts whose values were read with mods m.
func (c *clause) finish(fs []fact, m mods, retract func(f *fact)) ([]fact, string) {
	hint, from, cease := c.trailer()
	for i := range fs {
		f := &fs[i]
		if (m.neg || m.cease || cease) && retract != nil {
			retract(f)
		}
		if c.correction && f.kind == memory.KindStatement {
			f.kind = memory.KindCorrection
		}
		if f.hint == "" {
			f.hint, f.from = hint, from
		}
	}
	return fs, ""
}

// retractValue turns a fact into "no longer X": value null, retracts X.
func retractValue(f *fact) {
	f.retracts = f.value
	f.value = jsonNull
	f.kind = memory.KindCorrection
	var s string
	_ = json.Unmarshal(f.retracts, &s)
	f.text = memory.RenderText(f.key, nil) + " no longer " + s
	f.contra = nil
}

// trailer scans the rest of the clause for "anymore" and a time hint.
func (c *clause) trailer() (hint string, from *time.Time, cease bool) {
	for c.i < len(c.t) {
		w := c.word(0)
		switch {
		case w == "anymore" || (w == "any" && c.word(1) == "more") || w == "больше":
			cease = true
		case hint == "" && (w == "since" || w == "in" || w == "from" || w == "as" || w == "starting" || w == "с" || w == "в"):
			if h, f, ok := c.timeHint(); ok {
				hint, from = h, f
				continue
			}
		}
		c.i++
	}
	return hint, from, cease
}

// timeHint reads "since May", "in May 2021", "as of 2020", "с мая" at the cursor.
func (c *clause) timeHint() (string, *time.Time, bool) {
	start := c.i
	j := c.i + 1
	if c.word(0) == "as" {
		if c.word(1) != "of" {
			return "", nil, false
		}
		j++
	}
	word := func(k int) string {
		if k < len(c.t) {
			return c.t[k].w
		}
		return ""
	}
	if word(j) == "last" || word(j) == "this" || word(j) == "early" || word(j) == "late" || word(j) == "mid" {
		j++
	}
	month, year := 0, 0
	if mo, ok := months[word(j)]; ok {
		month = mo
		j++
		if y, ok := yearWord(word(j)); ok {
			year = y
			j++
		}
	} else if y, ok := yearWord(word(j)); ok {
		year = y
		j++
	} else if word(j) == "year" || word(j) == "month" || word(j) == "week" || word(j) == "summer" ||
		word(j) == "winter" || word(j) == "spring" || word(j) == "fall" || word(j) == "autumn" {
		j++
	} else {
		return "", nil, false
	}
	hint := c.p.text[c.t[start].s:c.t[j-1].e]
	c.i = j
	var from *time.Time
	at := c.p.at
	switch {
	case year > 0:
		t := time.Date(year, time.Month(max(month, 1)), 1, 0, 0, 0, 0, time.UTC)
		from = &t
	case month > 0 && !at.IsZero():
		y := at.Year()
		if time.Month(month) > at.Month() {
			y--
		}
		t := time.Date(y, time.Month(month), 1, 0, 0, 0, 0, time.UTC)
		from = &t
	}
	return hint, from, true
}

func yearWord(w string) (int, bool) {
	if len(w) != 4 || !isDigit(w[0]) {
		return 0, false
	}
	y, err := strconv.Atoi(w)
	return y, err == nil && y >= 1900 && y <= 2200
}

// object reads up to maxWords words from the cursor until a stop word or a
// mark. It skips leading articles. n is the number of words (0 when none);
// ok is false when the object runs past maxWords.
func (c *clause) object(maxWords int, stops ...map[string]bool) (s, e, n int, ok bool) {
	for c.eat("a", "an", "the") {
	}
	if !c.done() && c.t[c.i].kind == tQuote {
		tk := c.t[c.i]
		c.i++
		inner := strings.TrimSpace(strings.Trim(c.p.text[tk.s:tk.e], "\"“”«»„"))
		if inner == "" {
			return 0, 0, 0, true
		}
		off := strings.Index(c.p.text[tk.s:tk.e], inner)
		return tk.s + off, tk.s + off + len(inner), 1, true
	}
	first := c.i
	for !c.done() {
		tk := c.t[c.i]
		if tk.kind != tWord || isStop(tk.w, stops) || c.atBigramStop() {
			break
		}
		c.i++
	}
	n = c.i - first
	if n == 0 {
		return 0, 0, 0, true
	}
	if n > maxWords {
		return 0, 0, n, false
	}
	return c.t[first].s, c.t[c.i-1].e, n, true
}

func isStop(w string, stops []map[string]bool) bool {
	for _, s := range stops {
		if s[w] {
			return true
		}
	}
	return false
}

func (c *clause) atBigramStop() bool {
	a, b := c.word(0), c.word(1)
	switch a + " " + b {
	case "a lot", "very much", "so much", "as well", "any more", "at all", "right now", "for now",
		"these days", "of late", "for years", "for ages", "a bit", "to death", "more than":
		return true
	}
	return false
}

// slug makes a key segment of free text: lowercase letters and digits
// joined by '_', leading determiners dropped, at most 48 bytes.
func slug(s string) string {
	var b strings.Builder
	words := strings.FieldsFunc(lower(s), func(r rune) bool { return !isWordRune(r) })
	for len(words) > 1 {
		switch words[0] {
		case "a", "an", "the", "my", "our", "his", "her", "their", "some", "any":
			words = words[1:]
			continue
		}
		break
	}
	for _, w := range words {
		if b.Len() > 0 {
			b.WriteByte('_')
		}
		b.WriteString(w)
		if b.Len() >= 48 {
			break
		}
	}
	out := b.String()
	for len(out) > 48 {
		_, n := lastRune(out)
		out = out[:len(out)-n]
	}
	return out
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < 0x80 || s[i] >= 0xC0 {
			return rune(s[i]), len(s) - i
		}
	}
	return 0, 1
}

func scoped(scope, key string) string {
	if scope == "" {
		return key
	}
	return scope + "." + key
}

// sentiment reads the object of "love"/"hate": one fact per item of a list.
func (c *clause) sentiment(scope, about string, like bool, m mods) ([]fact, string) {
	// "I don't like X anymore" retracts the like; it states no dislike.
	m.cease = m.cease || c.anymoreAhead()
	if m.neg && !m.cease && !like {
		// "I don't hate X" is not "I like X".
		return nil, whyVague
	}
	if m.neg && !m.cease {
		like = false // "I don't like X" is a dislike, never a like
	}
	if c.at("to") {
		if infinitiveStops[c.word(1)] {
			return nil, whyConversation
		}
		c.i++
	}
	if c.done() {
		return nil, ""
	}
	if k := c.pastArticles(); c.t[k].kind == tWord && (badObjects[c.t[k].w] || c.t[k].w == "my" ||
		c.t[k].w == "our" || c.t[k].w == "his" || c.t[k].w == "her" || c.t[k].w == "their" || c.t[k].w == "mine") {
		return nil, whyConversation
	}
	listStart := c.i
	// A list: "tea, coffee and juice".
	var items [][2]int
	for {
		s, e, n, ok := c.object(6, stopWords, listJoiners)
		if !ok {
			return nil, whyTooLong
		}
		if n > 0 {
			items = append(items, [2]int{s, e})
			if c.items++; c.items > maxItems {
				return nil, whyTooLong
			}
		}
		if c.at("and", "or", "и", "или", "&") || (!c.done() && c.t[c.i].w == "," && c.i+1 < len(c.t) && c.t[c.i+1].kind == tWord && !stopWords[c.t[c.i+1].w]) {
			c.i++
			for c.eat("and", "or", "и", "или") {
			}
			// "I love tea and hate coffee": a second verb starts a second sentiment.
			if v := c.word(0); likeVerbs[v] || dislikeVerbs[v] {
				c.i++
				more, _ := c.sentiment(scope, about, likeVerbs[v], mods{})
				return append(c.sentimentFacts(items, scope, about, like, m), more...), ""
			}
			if c.t[min(c.i, len(c.t)-1)].kind == tWord && badObjects[c.word(0)] {
				break
			}
			continue
		}
		break
	}
	if len(items) == 0 || c.i == listStart {
		return nil, ""
	}
	fs := c.sentimentFacts(items, scope, about, like, m)
	if len(fs) == 0 {
		return nil, whyConversation
	}
	hint, from, cease := c.trailer()
	for i := range fs {
		if cease && fs[i].retracts == nil {
			retractValue(&fs[i])
		}
		fs[i].hint, fs[i].from = hint, from
	}
	return fs, ""
}

// sentimentFacts makes one like or dislike per item; a ceased one ("no
// longer like") retracts the like instead.
func (c *clause) sentimentFacts(items [][2]int, scope, about string, like bool, m mods) []fact {
	var fs []fact
	for _, it := range items {
		v := c.p.text[it[0]:it[1]]
		sl := slug(v)
		if sl == "" || aboutConversation(sl) {
			continue
		}
		key, other, cat := "likes."+sl, "dislikes."+sl, "like"
		if !like {
			key, other, cat = other, key, "dislike"
		}
		fs = append(fs, fact{key: scoped(scope, key), value: jsonString(v), category: cat,
			kind: memory.KindStatement, conf: confExplicit, about: about,
			contra: []string{scoped(scope, other)}})
	}
	for i := range fs {
		if m.cease {
			retractValue(&fs[i])
		} else if c.correction {
			fs[i].kind = memory.KindCorrection
		}
	}
	return fs
}

var listJoiners = set("and", "or", "и", "или", "&")

// place reads a place for key (home.city, origin, birthplace).
func (c *clause) place(scope, about, key string, m mods) ([]fact, string) {
	s, e, n, ok := c.object(5, stopWords, placeStops, russianPlaceStops)
	if !ok {
		return nil, whyTooLong
	}
	if n == 0 || badObjects[lower(c.p.text[s:e])] {
		return nil, ""
	}
	conf := confExplicit
	if !hasUpper(c.p.text[s:e]) {
		if !c.p.allLower {
			return nil, "" // "I live in fear": a place has a capital unless the user types none
		}
		conf = confLoose
	}
	f := fact{key: scoped(scope, key), value: jsonString(c.p.text[s:e]), category: "place",
		kind: memory.KindStatement, conf: conf, about: about}
	return c.finish([]fact{f}, m, retractValue)
}

var russianPlaceStops = set("в", "во", "на", "с", "со", "из", "к", "где", "уже", "давно")

func hasUpper(s string) bool {
	for _, r := range s {
		if unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

// be reads what follows "am"/"is".
func (c *clause) be(scope, about string, self bool, m mods) ([]fact, string) {
	if why := c.readMods(&m); why != "" {
		return nil, why
	}
	w := c.word(0)
	switch {
	case w == "from":
		c.i++
		return c.place(scope, about, "origin", m)
	case w == "allergic" && c.word(1) == "to":
		c.i += 2
		return c.allergy(scope, about)
	case (w == "living" || w == "based" || w == "staying" || w == "located") && c.word(1) == "in":
		c.i += 2
		return c.place(scope, about, "home.city", m)
	case w == "working":
		c.i++
		return c.work(scope, about, m)
	case w == "moving" || w == "going" || w == "planning" || w == "thinking" || w == "considering" || w == "about":
		return nil, whyHypothetical
	case w == "into" && !m.neg:
		c.i++
		return c.sentiment(scope, about, true, m)
	case c.fanOf():
		return c.sentiment(scope, about, !m.neg, mods{cease: m.cease})
	case w == "married" && c.word(1) == "to":
		c.i += 2
		return c.relationName(scope, "spouse", m)
	case w == "feeling" || moods[w] || (moodAdverbs[w] && c.moodAhead()):
		return c.mood(scope, about, m)
	case w == "lactose" && c.word(1) == "intolerant":
		c.i += 2
		return c.finish([]fact{c.diet(scope, about, "lactose-intolerant")}, m, retractValue)
	case diets[w]:
		c.i++
		return c.finish([]fact{c.diet(scope, about, w)}, m, retractValue)
	case (w == "a" || w == "an") && diets[c.word(1)]:
		c.i += 2
		return c.finish([]fact{c.diet(scope, about, c.word(-1))}, m, retractValue)
	case w == "a" || w == "an":
		c.i++
		return c.occupation(scope, about, m)
	case isNumber(w) && c.word(1) == "years" && c.word(2) == "old":
		n, _ := strconv.Atoi(w)
		c.i += 3
		if n <= 0 || n > 130 || m.neg {
			return nil, ""
		}
		return c.finish([]fact{{key: scoped(scope, "age"), value: json.RawMessage(strconv.Itoa(n)),
			category: "age", kind: memory.KindStatement, conf: confExplicit, about: about}}, m, nil)
	case (w == "called" || w == "named") && !self:
		c.i++
		return c.relationNameHere(scope, about, m)
	case !self && c.i < len(c.t) && c.t[c.i].cap && c.t[c.i].kind == tWord && !m.neg:
		return c.relationNameHere(scope, about, m)
	case self && scope == "" && c.p.greeted && c.i < len(c.t) && c.t[c.i].cap && c.t[c.i].kind == tWord && !m.neg &&
		!badNames[w] && !notNames[w] && languages[w] == "" && c.i+1 >= len(c.t):
		// "Hi, I'm Anna." after a greeting: a name, said loosely. Without
		// one, "I'm Canadian" would be a name too.
		return c.name("name", confLoose), ""
	}
	return nil, ""
}

// notNames are capitalised words after "I'm" that are no name.
var notNames = set("sorry", "here", "back", "done", "ready", "sure", "new", "lost", "home",
	"in", "out", "glad", "busy", "free", "fine", "good", "late", "so", "also", "still",
	"just", "going", "trying", "looking", "not", "really", "very", "interested", "curious")

func (c *clause) moodAhead() bool {
	for k := 0; k < 6; k++ {
		w := c.word(k)
		if moods[w] {
			return true
		}
		if !moodAdverbs[w] {
			return false
		}
	}
	return false
}

func isNumber(w string) bool {
	if w == "" || len(w) > 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if !isDigit(w[i]) {
			return false
		}
	}
	return true
}

func (c *clause) diet(scope, about, d string) fact {
	return fact{key: scoped(scope, "diet"), value: jsonString(d), category: "health",
		kind: memory.KindStatement, conf: confExplicit, about: about}
}

// mood reads "tired", "so sad today": category mood, which the policy
// refuses for long-term memory. It is reported, never silently dropped.
func (c *clause) mood(scope, about string, m mods) ([]fact, string) {
	c.eat("feeling")
	start := c.i
	for c.i < len(c.t) && moodAdverbs[c.word(0)] && !moods[c.word(0)] {
		if c.word(0) == "not" {
			m.neg = true
		}
		c.i++
	}
	w := c.word(0)
	if !moods[w] {
		c.i = start
		return nil, ""
	}
	if w == "fed" && c.word(1) == "up" {
		c.i++
	}
	v := c.p.text[c.t[start].s:c.t[c.i].e]
	c.i++
	if m.neg && !strings.Contains(lower(v), "not") {
		v = "not " + v
	}
	f := fact{key: scoped(scope, "mood"), value: jsonString(v), category: "mood",
		kind: memory.KindStatement, conf: confMood, about: about}
	fs, _ := c.finish([]fact{f}, mods{}, nil)
	return fs, ""
}

// occupation reads "a (high school) teacher" after "I'm": only a known
// occupation noun makes it one ("I'm a bit lost" is none).
func (c *clause) occupation(scope, about string, m mods) ([]fact, string) {
	s, e, n, ok := c.object(4, stopWords, placeStops)
	if !ok || n == 0 {
		return nil, whyNoOccupation
	}
	last := c.t[c.i-1].w
	if !occupations[last] && !occupations[strings.TrimSuffix(last, "s")] {
		return nil, whyNoOccupation
	}
	cat := "occupation"
	if religiousOccupations[last] {
		cat = "religion"
	}
	conf := confGuarded
	if n == 1 {
		conf = confExplicit
	}
	f := fact{key: scoped(scope, "occupation"), value: jsonString(c.p.text[s:e]), category: cat,
		kind: memory.KindStatement, conf: conf, about: about}
	return c.finish([]fact{f}, m, retractValue)
}

// work reads "as a teacher", "at Acme", "for Acme" after "work".
func (c *clause) work(scope, about string, m mods) ([]fact, string) {
	switch {
	case c.eat("as"):
		c.eat("a", "an")
		return c.occupation(scope, about, m)
	case c.eat("at", "for"):
		s, e, n, ok := c.object(5, stopWords, placeStops)
		if !ok || n == 0 || badObjects[lower(c.p.text[s:e])] {
			return nil, ""
		}
		f := fact{key: scoped(scope, "work.employer"), value: jsonString(c.p.text[s:e]),
			category: "occupation", kind: memory.KindStatement, conf: confExplicit, about: about}
		return c.finish([]fact{f}, m, retractValue)
	}
	return nil, ""
}

// have reads "have a nut allergy", "have asthma", "have lived in", "have moved to".
func (c *clause) have(scope, about string, self bool, m mods) ([]fact, string) {
	if why := c.readMods(&m); why != "" {
		return nil, why
	}
	switch {
	case c.eatSeq("lived", "in"), c.eatSeq("been", "living", "in"):
		return c.place(scope, about, "home.city", m)
	case c.eat("been"):
		// "I've been a teacher for ten years", "I've been vegetarian since 2019"
		return c.be(scope, about, self, m)
	case c.eat("moved", "relocated"):
		c.eat("back")
		if !c.eat("to", "into") {
			return nil, ""
		}
		return c.place(scope, about, "home.city", m)
	case c.eat("allergies", "allergy") && c.eat("to"):
		return c.allergy(scope, about)
	}
	c.eat("a", "an")
	start := c.i
	// "a nut allergy", "a severe peanut allergy"
	for k := 0; k < 4 && c.i+k < len(c.t); k++ {
		if w := c.word(k); w == "allergy" || w == "allergies" {
			if k == 0 {
				return nil, ""
			}
			s, e := c.t[start].s, c.t[start+k-1].e
			c.i = start + k + 1
			return c.allergyFact(scope, about, c.p.text[s:e], m)
		}
	}
	w := c.word(0)
	if conditions[w] {
		c.i++
		f := fact{key: scoped(scope, "health.conditions."+slug(w)), value: jsonString(c.t[c.i-1].text(c.p.text)),
			category: "health", kind: memory.KindStatement, conf: confExplicit, about: about}
		return c.finish([]fact{f}, m, retractValue)
	}
	return nil, ""
}

func (t token) text(src string) string { return src[t.s:t.e] }

// allergy reads the list after "allergic to".
func (c *clause) allergy(scope, about string) ([]fact, string) {
	var fs []fact
	for {
		s, e, n, ok := c.object(4, stopWords, listJoiners)
		if !ok {
			return nil, whyTooLong
		}
		if n > 0 {
			f, _ := c.allergyFact(scope, about, c.p.text[s:e], mods{})
			fs = append(fs, f...)
		}
		if c.eat("and", "or", "и", "или", ",") {
			for c.eat("and", "or") {
			}
			continue
		}
		break
	}
	return c.finish(fs, mods{}, nil)
}

func (c *clause) allergyFact(scope, about, v string, m mods) ([]fact, string) {
	sl := slug(v)
	if sl == "" || badObjects[strings.ToLower(strings.TrimSpace(v))] {
		return nil, "" // "allergic to nothing" names no allergy
	}
	f := fact{key: scoped(scope, "health.allergies."+sl), value: jsonString(v), category: "health",
		kind: memory.KindStatement, conf: confExplicit, about: about}
	if m.neg || m.cease {
		retractValue(&f)
	}
	if c.correction && f.kind == memory.KindStatement {
		f.kind = memory.KindCorrection
	}
	return []fact{f}, ""
}

// avoid reads "don't eat pork": a diet restriction (health).
func (c *clause) avoid(scope, about string, m mods) ([]fact, string) {
	if m.cease {
		return nil, "" // "I no longer eat meat" says what they do eat: too loose
	}
	s, e, n, ok := c.object(4, stopWords)
	if !ok || n == 0 || badObjects[c.t[c.i-n].w] {
		return nil, ""
	}
	v := c.p.text[s:e]
	f := fact{key: scoped(scope, "diet.avoids."+slug(v)), value: jsonString(v), category: "health",
		kind: memory.KindStatement, conf: confExplicit, about: about}
	return c.finish([]fact{f}, mods{}, nil)
}

// born reads "born on May 5, 1990", "born in 1990", "born in Kyiv".
func (c *clause) born(scope, about string) ([]fact, string) {
	if c.eat("on") {
		return c.birthday(scope, about)
	}
	if !c.eat("in") {
		return nil, ""
	}
	if y, ok := yearWord(c.word(0)); ok {
		c.i++
		return c.finish([]fact{{key: scoped(scope, "birth_year"), value: json.RawMessage(strconv.Itoa(y)),
			category: "birthday", kind: memory.KindStatement, conf: confExplicit, about: about}}, mods{}, nil)
	}
	if months[c.word(0)] > 0 {
		return nil, ""
	}
	return c.place(scope, about, "birthplace", mods{})
}

// birthday reads a date: "May 5", "5th of May", "May 5th, 1990", "5 мая".
func (c *clause) birthday(scope, about string) ([]fact, string) {
	for c.eat("on", "the") {
	}
	day, month, year := 0, 0, 0
	if mo, ok := months[c.word(0)]; ok {
		month = mo
		c.i++
		c.eat("the")
		day = dayWord(c.word(0))
		if day > 0 {
			c.i++
		}
	} else if d := dayWord(c.word(0)); d > 0 {
		day = d
		c.i++
		c.eat("of")
		month = months[c.word(0)]
		if month > 0 {
			c.i++
		}
	}
	if month == 0 || day == 0 {
		return nil, ""
	}
	c.eat(",")
	if y, ok := yearWord(c.word(0)); ok {
		year = y
		c.i++
	}
	check := time.Date(max(year, 2000), time.Month(month), day, 0, 0, 0, 0, time.UTC)
	if check.Day() != day {
		return nil, "" // February 30
	}
	v := map[string]int{"month": month, "day": day}
	text := fmt.Sprintf("birthday: %s %d", time.Month(month), day)
	if year > 0 {
		v["year"] = year
		text += fmt.Sprintf(", %d", year)
	}
	b, _ := json.Marshal(v)
	f := fact{key: scoped(scope, "birthday"), value: b, text: text, category: "birthday",
		kind: memory.KindStatement, conf: confExplicit, about: about}
	return c.finish([]fact{f}, mods{}, nil)
}

// dayWord reads "5", "5th", "21st" as a day of the month.
func dayWord(w string) int {
	w = strings.TrimRight(w, "stndrh")
	if w == "" || len(w) > 2 || !isDigit(w[0]) || !isDigit(w[len(w)-1]) {
		return 0
	}
	d, err := strconv.Atoi(w)
	if err != nil || d < 1 || d > 31 {
		return 0
	}
	return d
}

// name reads a name for key from the cursor: up to three words, none a
// function word. A lower-case name is accepted with less confidence.
func (c *clause) name(key string, conf float64) []fact {
	c.eat("is", "'s", ":", "-")
	start := c.i
	for c.i < len(c.t) && c.i-start < 3 {
		tk := c.t[c.i]
		if tk.kind != tWord || nameStops[tk.w] || stopWords[tk.w] || (c.i > start && !tk.cap && c.t[start].cap) {
			break
		}
		if c.i == start && (badNames[tk.w] || isNumber(tk.w)) {
			return nil
		}
		c.i++
	}
	if c.i == start {
		return nil
	}
	if !c.t[start].cap {
		conf = min(conf, confLoose)
	}
	v := c.p.text[c.t[start].s:c.t[c.i-1].e]
	kind := memory.KindStatement
	if c.correction {
		kind = memory.KindCorrection
	}
	return []fact{{key: key, value: jsonString(v), category: "name", kind: kind, conf: conf}}
}

// possessive reads what follows "my": a name, birthday, favourite, native
// language, or a relation ("my wife Anna loves roses").
func (c *clause) possessive() ([]fact, string) {
	switch {
	case c.eatSeq("name"), c.eatSeq("first", "name"), c.eatSeq("full", "name"), c.eatSeq("real", "name"), c.eatSeq("given", "name"):
		return c.name("name", confExplicit), ""
	case c.eatSeq("nickname"), c.eatSeq("preferred", "name"):
		return c.name("preferred_name", confExplicit), ""
	case c.eatSeq("last", "name"), c.eatSeq("surname"), c.eatSeq("family", "name"):
		return c.name("family_name", confExplicit), ""
	case c.eat("birthday", "bday", "b-day", "birthdate") || c.eatSeq("date", "of", "birth"):
		c.eat("is", "'s", "falls", ":")
		return c.birthday("", "")
	case c.eat("favorite", "favourite", "fav", "fave"):
		return c.favorite("", "")
	case c.eatSeq("native", "language"), c.eatSeq("first", "language"), c.eatSeq("mother", "tongue"):
		c.eat("is", "'s")
		if lang, ok := languages[c.word(0)]; ok {
			c.i++
			return c.finish([]fact{c.lang("language.native", lang, memory.KindStatement)}, mods{}, nil)
		}
		return nil, ""
	case c.eat("job", "occupation", "profession"):
		c.eat("is", "'s")
		c.eat("a", "an")
		return c.occupation("", "", mods{})
	case c.eat("hometown") || c.eatSeq("home", "town"):
		c.eat("is", "'s")
		return c.place("", "", "origin", mods{})
	}
	return c.relation()
}

// favorite reads "favorite color is blue": favorite.<thing>.
func (c *clause) favorite(scope, about string) ([]fact, string) {
	start := c.i
	for c.i < len(c.t) && c.i-start < 3 && !c.at("is", "are", "'s") && c.t[c.i].kind == tWord {
		c.i++
	}
	if c.i == start || !c.eat("is", "are", "'s") {
		return nil, ""
	}
	thing := slug(c.p.text[c.t[start].s:c.t[c.i-2].e])
	// "is not pizza", "is no longer red": the value is denied, never kept
	// as "not pizza"; the statement retracts it.
	var m mods
	if why := c.readMods(&m); why != "" {
		return nil, why
	}
	s, e, n, ok := c.object(6, stopWords)
	if !ok || n == 0 || badObjects[c.t[c.i-n].w] {
		return nil, ""
	}
	f := fact{key: scoped(scope, "favorite."+thing), value: jsonString(c.p.text[s:e]),
		category: "preference", kind: memory.KindStatement, conf: confExplicit, about: about}
	return c.finish([]fact{f}, m, retractValue)
}

// relation reads "my wife (Anna) ..." and scopes what follows to her.
func (c *clause) relation() ([]fact, string) {
	role := c.word(0)
	if role == "best" && c.word(1) == "friend" {
		c.i++
		role = "best_friend"
	} else if !roles[role] {
		return nil, ""
	} else if r, ok := canonicalRole[role]; ok {
		role = r
	}
	c.i++
	c.eat(",")
	name := ""
	if c.i < len(c.t) && c.t[c.i].kind == tWord && c.t[c.i].cap && !badNames[c.t[c.i].w] && !nameStops[c.t[c.i].w] {
		name = c.t[c.i].text(c.p.text)
		c.i++
		// A second capitalised word is a family name: "my friend Anna Smith".
		if c.i < len(c.t) && c.t[c.i].kind == tWord && c.t[c.i].cap && !stopWords[c.t[c.i].w] {
			name += " " + c.t[c.i].text(c.p.text)
			c.i++
		}
	}
	c.eat(",")
	scope, about := role, role
	if name != "" {
		about += " " + name
		if !singleRoles[role] && role != "best_friend" {
			scope += "." + slug(name)
		}
	}
	var fs []fact
	if name != "" {
		fs = append(fs, c.relationFact(role, name))
	}
	if c.at("'s") && (c.word(1) == "birthday" || c.word(1) == "name") {
		c.i++
		if c.eat("name") {
			c.eat("is", "'s")
			return c.relationNameHereRole(role, about, fs)
		}
		c.i++
		c.eat("is", "'s", "falls")
		more, why := c.birthday(scope, about)
		return append(fs, more...), why
	}
	more, why := c.predicate(scope, about, false)
	if len(more) > 0 {
		why = ""
	}
	return append(fs, more...), why
}

func (c *clause) relationFact(role, name string) fact {
	key := "relationship." + role
	if !singleRoles[role] {
		key += "." + slug(name)
	}
	b, _ := json.Marshal(map[string]string{"relation": role, "name": name})
	kind := memory.KindStatement
	if c.correction {
		kind = memory.KindCorrection
	}
	return fact{key: key, value: b, text: "relationship " + strings.ReplaceAll(role, "_", " ") + ": " + name,
		category: "relationship", kind: kind, conf: confExplicit, about: role + " " + name}
}

// relationNameHere reads "is (called) Anna" after "my wife".
func (c *clause) relationNameHere(scope, about string, m mods) ([]fact, string) {
	if m.neg || m.cease {
		return nil, ""
	}
	role := strings.SplitN(scope, ".", 2)[0]
	return c.relationNameHereRole(role, about, nil)
}

func (c *clause) relationNameHereRole(role, about string, fs []fact) ([]fact, string) {
	nf := c.name("x", confExplicit)
	if len(nf) == 0 {
		return fs, ""
	}
	var name string
	_ = json.Unmarshal(nf[0].value, &name)
	if !hasUpper(name) && !c.p.allLower {
		return fs, ""
	}
	return append(fs, c.relationFact(role, name)), ""
}

// relationName reads "married to Anna".
func (c *clause) relationName(scope, role string, m mods) ([]fact, string) {
	if m.neg || m.cease || scope != "" {
		return nil, ""
	}
	return c.relationNameHereRole(role, "", nil)
}

// russianSelf reads "я живу в Москве", "я люблю кошек", "я из Казани".
func (c *clause) russianSelf() ([]fact, string) {
	var m mods
	if why := c.readMods(&m); why != "" {
		return nil, why
	}
	w := c.word(0)
	switch {
	case w == "живу":
		c.i++
		if !c.eat("в", "во") {
			return nil, ""
		}
		return c.place("", "", "home.city", m)
	case w == "переехал" || w == "переехала" || w == "переехали":
		c.i++
		if !c.eat("в", "во") {
			return nil, ""
		}
		return c.place("", "", "home.city", m)
	case w == "из" && !m.neg:
		c.i++
		return c.place("", "", "origin", m)
	case likeVerbs[w] || dislikeVerbs[w]:
		c.i++
		return c.sentiment("", "", likeVerbs[w], m)
	case w == "работаю":
		c.i++
		if c.eat("в", "на") {
			s, e, n, ok := c.object(4, stopWords, russianPlaceStops)
			if !ok || n == 0 {
				return nil, ""
			}
			return c.finish([]fact{{key: "work.employer", value: jsonString(c.p.text[s:e]),
				category: "occupation", kind: memory.KindStatement, conf: confGuarded}}, m, retractValue)
		}
	}
	return nil, ""
}

// anymoreAhead reports whether the clause says "anymore" (read once per clause).
func (c *clause) anymoreAhead() bool {
	if c.anymore == 0 {
		c.anymore = 2
		for k := range c.t {
			if w := c.t[k].w; w == "anymore" || (w == "any" && k+1 < len(c.t) && c.t[k+1].w == "more") {
				c.anymore = 1
				break
			}
		}
	}
	return c.anymore == 1
}

// pastArticles is the index of the first token after a/an/the (at most the last token).
func (c *clause) pastArticles() int {
	k := c.i
	for k < len(c.t)-1 && (c.t[k].w == "a" || c.t[k].w == "an" || c.t[k].w == "the") {
		k++
	}
	return k
}

// fanOf reads "a (big|huge) fan of" and leaves the cursor on its object.
func (c *clause) fanOf() bool {
	k := 0
	if c.word(k) == "a" {
		k++
	}
	for c.word(k) == "big" || c.word(k) == "huge" || c.word(k) == "great" || c.word(k) == "massive" {
		k++
	}
	if c.word(k) == "fan" && c.word(k+1) == "of" {
		c.i += k + 2
		return true
	}
	return false
}

// aboutConversation reports whether a slug names part of the chat itself
// ("new_version", "your_answer"): a comment on the reply, not a taste.
func aboutConversation(slug string) bool {
	for _, w := range strings.Split(slug, "_") {
		if conversationNouns[w] {
			return true
		}
	}
	return false
}

var (
	_ memory.Extractor = Rules{}
	_ memory.Extractor = (*LLM)(nil)
)

// resolveHint turns a model's words for when a fact began ("since May",
// "in 2021") into a time, read as the rules read them against the message
// time; nil when they say no month or year.
func resolveHint(hint string, at time.Time) *time.Time {
	p := parser{text: hint, at: at}
	p.toks = tokenize(hint, nil)
	c := &clause{p: &p, t: p.toks}
	for ; c.i < len(c.t); c.i++ {
		switch c.word(0) {
		case "since", "in", "from", "as", "starting", "с", "в":
			if _, from, ok := c.timeHint(); ok {
				return from
			}
		}
	}
	return nil
}
