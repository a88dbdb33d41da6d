package contextbuild

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/search"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/tokens"
)

// Owner kinds of a history.
const (
	ownerRun     = "run"
	ownerSession = "session"
)

// windowRadius is how many neighbours on each side an item's window holds.
const windowRadius = 2

// neighbours is how many items after a chosen question come with it: the
// answer follows the turn that asked. After a statement the next turn is
// mostly a reaction, not worth its tokens, unless the statement is a best
// hit and the reaction asks about it (bestHits).
const neighbours = 1

// relevantCandidates bounds how many older items each ranking proposes.
const relevantCandidates = 400

// bestHits is how many of each full-text ranking's first hits count as its
// best: the turns the query matches most surely, by their own words or by
// the words around them. A best hit followed by a question brings that
// question and its answer (addHistory).
const bestHits = 3

// Pseudo-relevance feedback: the terms the best feedbackDocs hits share
// beyond the question's words (feedbackTerms of them) rank a further list,
// fused at feedbackWeight. A question names what it asks about; the turns
// that answer it often use other words that its best hits also use.
var (
	feedbackDocs   = 5
	feedbackTerms  = 10
	feedbackWeight = 0.5
)

// owner is the run or session a context is built for: its state and its history.
type owner struct {
	stateKind, stateLabel, stateSrc, state string
	hist                                   *history
}

// item is one raw event or message of a history.
type item struct {
	seq  int64
	role llm.Role
	text string
	// date, when the event carries one, is shown once per run of items of
	// the same date rather than on every line.
	date string
	// speaker is who said it, when the event names a speaker, role or
	// author.
	speaker string
}

// message is the item as a chat message of its own.
func (it item) message() llm.Message {
	if it.date != "" {
		return llm.Message{Role: it.role, Content: "(" + it.date + ") " + it.text}
	}
	return llm.Message{Role: it.role, Content: it.text}
}

// history is an owner's raw items, cached with their token counts (per
// tokenizer) and a search index, and extended by what was appended since.
type history struct {
	kind, id string
	userID   string // the session's user
	// generation tells a session created again under the same id apart.
	generation string

	mu      sync.Mutex
	items   []item
	lastSeq int64
	index   *search.TextIndex
	// windows indexes each item with its neighbours, so a turn that
	// answers a question asked just before it ranks by that question too.
	windows *search.TextIndex
	vectors *search.VectorIndex
	vecDone int // items[:vecDone] have vectors
	// speakers counts the items of each named speaker.
	speakers map[string]int
	// counts[tokenizer] holds, per item, its tokens as a line and as a message.
	counts map[string]*itemCounts
}

type itemCounts struct{ line, msg []int }

func (b *Builder) readOwner(ctx context.Context, tenantID string, r Request) (*owner, error) {
	switch {
	case r.SessionID != "":
		s, err := b.src.Sessions.Get(ctx, tenantID, r.SessionID, r.UserID)
		if err != nil {
			return nil, err // the session service names the session
		}
		o := &owner{stateKind: KindSessionState, stateLabel: "Session state", stateSrc: "session:" + r.SessionID + "@" + strconv.FormatInt(s.Revision, 10), state: stateText(s.State)}
		h := b.history.get(tenantID, ownerSession, r.SessionID, s.CreatedAt.String())
		h.mu.Lock()
		h.userID = r.UserID
		defer h.mu.Unlock()
		// Messages answers the latest page after a seq: page back from the
		// newest until the cached part is reached, then append in order.
		var pages [][]session.Message
		before := int64(0)
		for {
			msgs, err := b.src.Sessions.Messages(ctx, tenantID, r.SessionID, r.UserID, session.MessageQuery{AfterSeq: h.lastSeq, BeforeSeq: before, Limit: session.MaxListLimit})
			if err != nil {
				return nil, fmt.Errorf("read messages of session %s: %w", r.SessionID, err)
			}
			pages = append(pages, msgs)
			if len(msgs) < session.MaxListLimit {
				break
			}
			before = msgs[0].Seq
		}
		for i := len(pages) - 1; i >= 0; i-- {
			for _, m := range pages[i] {
				h.append(item{seq: m.Seq, role: chatRole(m.Role), text: roleText(m.Role, m.Content)})
			}
		}
		// The session's cap trimmed the oldest messages: they are gone
		// from the source, so they go from the cache too.
		h.trimBefore(s.LastSeq - int64(s.MessageCount) + 1)
		o.hist = h
		return o, nil
	case r.RunID != "":
		rn, err := b.src.Runs.Get(ctx, tenantID, r.RunID)
		if err != nil {
			return nil, err // the run service names the run
		}
		label := "Run state"
		if rn.NextStep != "" {
			label += " (next step " + rn.NextStep + ")"
		}
		o := &owner{stateKind: KindRunState, stateLabel: label, stateSrc: "run:" + r.RunID + "@" + strconv.FormatInt(rn.StateRevision, 10), state: stateText(rn.State)}
		h := b.history.get(tenantID, ownerRun, r.RunID, rn.CreatedAt.String())
		h.mu.Lock()
		defer h.mu.Unlock()
		for h.lastSeq < rn.StateRevision {
			evs, err := b.src.Runs.Events(ctx, tenantID, r.RunID, h.lastSeq, run.MaxListLimit)
			if err != nil {
				return nil, fmt.Errorf("read events of run %s: %w", r.RunID, err)
			}
			for _, e := range evs {
				date, speaker, text := eventText(e)
				h.append(item{seq: e.Seq, role: llm.RoleUser, text: text, date: date, speaker: speaker})
			}
			if len(evs) < run.MaxListLimit {
				break
			}
		}
		o.hist = h
		return o, nil
	}
	return nil, nil
}

// roleText is a message's text as the model sees it: a role the chat
// protocol has no turn for (a tool's output with no call to answer, an
// application's own role) goes in as a user turn, so it is named in the
// text, not passed off as the user's own words.
func roleText(role, content string) string {
	if chatRole(role) == llm.RoleUser && role != string(llm.RoleUser) {
		return "[" + role + "] " + content
	}
	return content
}

func stateText(s json.RawMessage) string {
	if len(s) == 0 || string(s) == "null" || string(s) == "{}" {
		return ""
	}
	return string(compactJSON(s))
}

func chatRole(r string) llm.Role {
	switch r {
	case "assistant":
		return llm.RoleAssistant
	case "system":
		return llm.RoleSystem
	default:
		return llm.RoleUser
	}
}

// eventText renders an event for a model: a payload that carries a text
// ("text", "content" or "message", with an optional "speaker" or "role"
// and "date") reads as that line; any other payload as its type, step and
// compact JSON.
func eventText(e run.Event) (date, speaker, text string) {
	var p map[string]any
	if json.Unmarshal(e.Payload, &p) == nil {
		for _, k := range []string{"text", "content", "message"} {
			if t, ok := p[k].(string); ok {
				var b strings.Builder
				for _, sk := range []string{"speaker", "role", "author"} {
					if sp, ok := p[sk].(string); ok && sp != "" {
						b.WriteString(sp + ": ")
						speaker = sp
						break
					}
				}
				b.WriteString(t)
				d, _ := p["date"].(string)
				return strings.TrimSpace(d), speaker, b.String()
			}
		}
	}
	s := e.EventType
	if e.StepID != "" {
		s += " " + e.StepID
	}
	if len(e.Payload) > 0 && string(e.Payload) != "null" {
		s += ": " + string(compactJSON(e.Payload))
	}
	return "", "", s
}

func (h *history) append(it item) {
	if it.seq <= h.lastSeq {
		return
	}
	h.items = append(h.items, it)
	h.lastSeq = it.seq
	if it.speaker != "" {
		if h.speakers == nil {
			h.speakers = map[string]int{}
		}
		h.speakers[it.speaker]++
	}
	// The date is searched with the text, in the item and in its window:
	// a question that names a month or a year asks about what was said then.
	h.index.Add(strconv.FormatInt(it.seq, 10), it.text+"\n"+it.date)
	// Appending item n-1 changes the windows of the items up to
	// windowRadius before it.
	n := len(h.items)
	for i := max(n-1-windowRadius, 0); i < n; i++ {
		h.indexWindow(i)
	}
	for _, c := range h.counts {
		c.line = append(c.line, 0)
		c.msg = append(c.msg, 0)
	}
}

// indexWindow indexes item i with its neighbours (windowRadius each side).
func (h *history) indexWindow(i int) {
	var b strings.Builder
	for j := max(i-windowRadius, 0); j <= min(i+windowRadius, len(h.items)-1); j++ {
		b.WriteString(h.items[j].text)
		b.WriteByte('\n')
	}
	b.WriteString(h.items[i].date)
	h.windows.Add(strconv.FormatInt(h.items[i].seq, 10), b.String())
}

func (h *history) trimBefore(seq int64) {
	i := sort.Search(len(h.items), func(i int) bool { return h.items[i].seq >= seq })
	if i == 0 {
		return
	}
	for _, it := range h.items[:i] {
		if it.speaker != "" {
			if h.speakers[it.speaker]--; h.speakers[it.speaker] <= 0 {
				delete(h.speakers, it.speaker)
			}
		}
		id := strconv.FormatInt(it.seq, 10)
		h.index.Remove(id)
		h.windows.Remove(id)
		if h.vectors != nil {
			h.vectors.Remove(id)
		}
	}
	h.items = append([]item(nil), h.items[i:]...)
	// The windows of the first kept items held the trimmed ones: index
	// them again as a history read after the trim would, so that what is
	// gone from the source neither ranks them nor makes the context
	// depend on when this cache was filled.
	for k := 0; k < min(windowRadius, len(h.items)); k++ {
		h.indexWindow(k)
	}
	h.vecDone = max(h.vecDone-i, 0)
	for _, c := range h.counts {
		c.line = append([]int(nil), c.line[i:]...)
		c.msg = append([]int(nil), c.msg[i:]...)
	}
}

// linePrefix names an item's source inside a part made of lines.
func (h *history) linePrefix(it item) string {
	return "#" + strconv.FormatInt(it.seq, 10) + " "
}

func (h *history) srcPrefix() string {
	if h.kind == ownerSession {
		return "msg:"
	}
	return "seq:"
}

// wholeTokens is what every item takes as messages, if that fits in
// budget (ok false, and n past budget, when it does not).
func (h *history) wholeTokens(c tokens.Counter, budget int) (n int, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.countsFor(c).msg {
		if n += t; n > budget {
			return n, false
		}
	}
	return n, true
}

// countsFor returns the cached counts under c, filling what is missing.
func (h *history) countsFor(c tokens.Counter) *itemCounts {
	ic := h.counts[c.Name()]
	if ic == nil {
		ic = &itemCounts{line: make([]int, len(h.items)), msg: make([]int, len(h.items))}
		h.counts[c.Name()] = ic
	}
	for i, it := range h.items {
		if ic.line[i] == 0 {
			ic.line[i] = c.Count(h.linePrefix(it) + it.text + "\n")
			ic.msg[i] = tokens.MessageTokens(c, it.message())
		}
	}
	return ic
}

// addHistory spends budget on the history: the newest items as messages,
// and, when a query is given, the older items most relevant to it (full
// text and, with an embedder, meaning, fused) in one part, in seq order.
// Items neither shown nor summarised are recorded as left out.
func (b *Builder) addHistory(ctx context.Context, a *assembly, h *history, query string, budget int, covered span) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.items) == 0 || budget <= 0 {
		if len(h.items) > 0 {
			a.leave(KindHistory, h.ranges(h.items), "no budget left")
		}
		return nil
	}
	ic := h.countsFor(a.counter)
	all := 0
	for _, n := range ic.msg {
		all += n
	}
	recentBudget := budget
	if query != "" && all > budget {
		recentBudget = int(float64(budget) * recentShare)
	}
	// The newest items first, back from the end, while they fit; at least
	// minRecent when the whole budget holds them.
	// Items a shown summary covers are not repeated in the recent window
	// (the older part below may still quote one that the query needs).
	start, used := len(h.items), 0
	for start > 0 && h.items[start-1].seq > covered.to {
		t := ic.msg[start-1]
		lim := recentBudget
		if len(h.items)-start < minRecent {
			lim = budget
		}
		if used+t > lim {
			break
		}
		used += t
		start--
	}
	chosen := map[int]bool{}
	spentOlder := 0
	if query != "" && start > 0 {
		header := "Earlier history relevant to the question (oldest first):"
		left := budget - used - (tokens.TokensPerMessage + a.counter.Count(string(roleOf(KindHistory))) + a.counter.Count(header+"\n"))
		ranked, best, terms, fellBack := b.rankOlder(ctx, h, query, start)
		if fellBack != nil {
			a.leave(KindHistory, []string{"embedder:" + b.src.Embedder.Model()}, "ranked by full text only: the embedder failed ("+fellBack.Error()+")")
		}
		dates := map[string]bool{}
		take := func(i int) {
			if i < 0 || i >= start || chosen[i] {
				return
			}
			t := ic.line[i]
			d := h.items[i].date
			if d != "" && !dates[d] {
				t += dateLineTokens(a, d)
			}
			if t <= left {
				chosen[i] = true
				left -= t
				dates[d] = true
			}
		}
		qterms := make(map[string]bool, len(terms))
		for _, t := range terms {
			qterms[t] = true
		}
		for _, i := range ranked {
			take(i)
			if asksAbout(h.items[i].text, qterms) {
				for k := 1; k <= neighbours; k++ {
					take(i + k)
				}
			}
			if !chosen[i] {
				continue
			}
			// The other way round: an answer brings the question it
			// answers when that question asks about the query (the
			// answer often leaves the subject to it: "Yes, twice!").
			if i > 0 && asksAbout(h.items[i-1].text, qterms) {
				take(i - 1)
			}
			// A best hit followed by a question (mostly about it: "What
			// was it about?") brings that question and its answer: the
			// detail the query asks for is often given only when asked.
			// Only for the best hits: for every hit, these pairs crowd
			// out other hits.
			if best[i] && i+1 < start && strings.IndexByte(h.items[i+1].text, '?') >= 0 {
				take(i + 1)
				if chosen[i+1] {
					take(i + 2)
				}
			}
		}
		if len(chosen) > 0 {
			idx := make([]int, 0, len(chosen))
			for i := range chosen {
				idx = append(idx, i)
			}
			sort.Ints(idx)
			lines := make([]line, 0, len(idx))
			total := tokens.TokensPerMessage + a.counter.Count(string(roleOf(KindHistory))) + a.counter.Count(header+"\n")
			prev := ""
			for _, i := range idx {
				it := h.items[i]
				if it.date != "" && it.date != prev {
					n := dateLineTokens(a, it.date)
					lines = append(lines, line{text: dateLine(it.date), tokens: n})
					total += n
				}
				prev = it.date
				lines = append(lines, line{text: h.linePrefix(it) + it.text, src: h.srcPrefix() + strconv.FormatInt(it.seq, 10), tokens: ic.line[i]})
				total += ic.line[i]
			}
			a.addLinesMessage(KindHistory, header, lines, total, roleOf(KindHistory))
			spentOlder = total
		}
	}
	// What the older items left unused goes to more recent ones, back
	// from the recent window down to the newest item already shown.
	for start > 0 && !chosen[start-1] && h.items[start-1].seq > covered.to && used+ic.msg[start-1] <= budget-spentOlder {
		used += ic.msg[start-1]
		start--
	}
	if start < len(h.items) {
		recent := h.items[start:]
		src := make([]string, len(recent))
		for k, it := range recent {
			src[k] = h.srcPrefix() + strconv.FormatInt(it.seq, 10)
			a.msgs = append(a.msgs, it.message())
		}
		a.acc.Parts = append(a.acc.Parts, Part{Kind: KindRecent, Tokens: used, SourceIDs: src})
		a.total += used
	}
	var summarised, out []item
	for i, it := range h.items[:start] {
		if chosen[i] {
			continue
		}
		if covered.holds(it.seq) {
			summarised = append(summarised, it)
		} else {
			out = append(out, it)
		}
	}
	if len(summarised) > 0 {
		a.leave(KindHistory, h.ranges(summarised), "covered by a verified summary")
	}
	if len(out) > 0 {
		a.leave(KindHistory, h.ranges(out), "over budget")
	}
	return nil
}

// rankOlder orders items[:end] by relevance to query: full text, fused with
// vectors when an embedder is set. Items that match nothing are not ranked.
// It also returns the best hits (the first bestHits of each full-text
// ranking of the query's own terms) and the query's analysed terms.
func (b *Builder) rankOlder(ctx context.Context, h *history, query string, end int) (out []int, best map[int]bool, terms []string, fellBack error) {
	limit := h.items[end-1].seq
	keep := func(id string) bool {
		n, _ := strconv.ParseInt(id, 10, 64)
		return n <= limit
	}
	terms = search.Analyze(query)
	terms = append(terms, h.index.Variants(query)...)
	first := h.index.SearchTerms(terms, relevantCandidates, keep)
	lists := [][]search.Ranked{first, h.windows.SearchTerms(terms, relevantCandidates, keep)}
	weights := []float64{1, 1}
	// own holds the rankings of the query's own terms in full text (not
	// the feedback terms, nor vectors): the ones bestHits are taken from.
	own := [][]search.Ranked{lists[0], lists[1]}
	if len(first) > 0 {
		top := make([]string, 0, feedbackDocs)
		for _, r := range first[:min(feedbackDocs, len(first))] {
			top = append(top, r.ID)
		}
		if exp := h.index.Expansion(top, terms, feedbackTerms); len(exp) > 0 {
			lists = append(lists, h.index.SearchTerms(exp, relevantCandidates, keep))
			weights = append(weights, feedbackWeight)
		}
	}
	if b.src.Embedder != nil {
		// An embedder that fails (a remote model down or refusing) leaves
		// the ranking to full text, said in the accounting, rather than
		// failing the context.
		vs, err := b.byMeaning(ctx, h, query, keep)
		if err != nil {
			fellBack = err
		} else {
			lists = append(lists, vs)
			weights = append(weights, 1)
		}
	}
	// A question that names some of the history's speakers is mostly
	// answered by what they said: their items rank in lists of their own
	// too (the others still rank, by the lists above).
	if named := h.namedSpeakers(terms); len(named) > 0 {
		keepNamed := func(id string) bool {
			n, _ := strconv.ParseInt(id, 10, 64)
			i, ok := h.find(n)
			return ok && n <= limit && named[h.items[i].speaker]
		}
		lists = append(lists, h.index.SearchTerms(terms, relevantCandidates, keepNamed), h.windows.SearchTerms(terms, relevantCandidates, keepNamed))
		weights = append(weights, 1, 1)
		own = append(own, lists[len(lists)-2:]...)
	}
	fused := search.RRF(search.RRFK, weights, lists...)
	pos := make(map[int64]int, end)
	for i, it := range h.items[:end] {
		pos[it.seq] = i
	}
	out = make([]int, 0, len(fused))
	for _, f := range fused {
		n, _ := strconv.ParseInt(f.ID, 10, 64)
		if i, ok := pos[n]; ok {
			out = append(out, i)
		}
	}
	best = map[int]bool{}
	for _, l := range own {
		for _, r := range l[:min(bestHits, len(l))] {
			n, _ := strconv.ParseInt(r.ID, 10, 64)
			if i, ok := pos[n]; ok {
				best[i] = true
			}
		}
	}
	return out, best, terms, fellBack
}

// byMeaning ranks the history's items up to keep by their vectors'
// closeness to the query's, embedding what is not embedded yet.
func (b *Builder) byMeaning(ctx context.Context, h *history, query string, keep func(string) bool) ([]search.Ranked, error) {
	if err := h.embed(ctx, b.src.Embedder); err != nil {
		return nil, err
	}
	qv, err := b.src.Embedder.Embed(ctx, []string{query})
	if err != nil || len(qv) != 1 {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	vs := h.vectors.Search(qv[0], relevantCandidates, func(id string, _ search.Meta) bool { return keep(id) })
	for i, v := range vs {
		if v.Score <= 0 {
			return vs[:i], nil
		}
	}
	return vs, nil
}

func (h *history) embed(ctx context.Context, e llm.Embedder) error {
	if h.vectors == nil || h.vectors.Dim() != e.Dim() {
		h.vectors, h.vecDone = search.NewVectorIndex(e.Dim()), 0
	}
	for h.vecDone < len(h.items) {
		batch := h.items[h.vecDone:min(h.vecDone+256, len(h.items))]
		texts := make([]string, len(batch))
		for i, it := range batch {
			texts[i] = it.text
		}
		vs, err := e.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("embed history: %w", err)
		}
		if len(vs) != len(batch) {
			return fmt.Errorf("embed history: %d vectors for %d texts", len(vs), len(batch))
		}
		for i, it := range batch {
			h.vectors.Upsert(strconv.FormatInt(it.seq, 10), vs[i], search.Meta{})
		}
		h.vecDone += len(batch)
	}
	return nil
}

// ranges names items as compact seq ranges ("seq:1-40").
func (h *history) ranges(items []item) []string {
	var out []string
	for i := 0; i < len(items); {
		j := i
		for j+1 < len(items) && items[j+1].seq == items[j].seq+1 {
			j++
		}
		if i == j {
			out = append(out, h.srcPrefix()+strconv.FormatInt(items[i].seq, 10))
		} else {
			out = append(out, h.srcPrefix()+strconv.FormatInt(items[i].seq, 10)+"-"+strconv.FormatInt(items[j].seq, 10))
		}
		i = j + 1
	}
	return out
}

// historyCache is a bounded LRU of histories.
type historyCache struct {
	mu sync.Mutex // makes get-or-replace one step
	c  *lru.Cache[historyKey, *history]
}

type historyKey struct{ tenant, kind, id string }

func newHistoryCache(size int) *historyCache {
	c, _ := lru.New[historyKey, *history](size) // errors only for size <= 0
	return &historyCache{c: c}
}

// get returns the cached history of an owner, a fresh one if none is cached
// or the cached one belongs to an earlier generation of the owner.
func (c *historyCache) get(tenant, kind, id, generation string) *history {
	k := historyKey{tenant, kind, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.c.Get(k); ok && h.generation == generation {
		return h
	}
	h := &history{kind: kind, id: id, generation: generation, index: search.NewTextIndex(), windows: search.NewTextIndex(), counts: map[string]*itemCounts{}}
	c.c.Add(k, h)
	return h
}

// dateLine heads a run of history lines of one date.
func dateLine(d string) string { return "(" + d + ")" }

func dateLineTokens(a *assembly, d string) int { return a.counter.Count(dateLine(d) + "\n") }

// find returns the position of the item of seq.
func (h *history) find(seq int64) (int, bool) {
	i := sort.Search(len(h.items), func(i int) bool { return h.items[i].seq >= seq })
	return i, i < len(h.items) && h.items[i].seq == seq
}

// namedSpeakers returns the history's speakers whose every name word is
// among the query terms; none when the query names them all (then it tells
// none apart) or the items name no speaker.
func (h *history) namedSpeakers(terms []string) map[string]bool {
	q := make(map[string]bool, len(terms))
	for _, t := range terms {
		q[t] = true
	}
	named := map[string]bool{}
	for sp := range h.speakers {
		words := search.Tokens(sp)
		all := len(words) > 0
		for _, w := range words {
			all = all && q[w]
		}
		if all {
			named[sp] = true
		}
	}
	if len(named) == len(h.speakers) {
		return nil
	}
	return named
}

// asksAbout tells whether text asks a question (a sentence ending in "?")
// that shares a term with the query: then the next turn likely answers
// what the query asks. A question about something else (the "and you?"
// that closes many chat turns) brings nothing worth its tokens.
func asksAbout(text string, qterms map[string]bool) bool {
	for {
		q := strings.IndexByte(text, '?')
		if q < 0 {
			return false
		}
		start := strings.LastIndexAny(text[:q], ".!?\n") + 1
		for _, t := range search.Analyze(text[start:q]) {
			if qterms[t] {
				return true
			}
		}
		text = text[q+1:]
	}
}
