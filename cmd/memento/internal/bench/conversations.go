package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mementohq/memento/memory"
)

// The LoCoMo evaluation (Maharana et al., ACL 2024): every turn of each
// conversation becomes a memory item of the subject "the conversation", and
// every question of categories 1-4 (multi-hop, temporal, open-domain,
// single-hop) is a search whose hits are scored by evidence recall: the
// fraction of the question's evidence turns named by the message_ids of the
// top k hits. Category 5 (adversarial, no evidence to find) is left out.

// LocomoConversation is one sample of a file in the LoCoMo layout.
type LocomoConversation struct {
	SampleID string
	SpeakerA string
	SpeakerB string
	Sessions []LocomoSession
	QA       []LocomoQA
}

// LocomoSession is one session of a conversation, in file order.
type LocomoSession struct {
	Number   int
	DateTime string    // as written in the file
	Date     time.Time // zero when DateTime does not parse
	Turns    []LocomoTurn
}

// LocomoTurn is one message.
type LocomoTurn struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
	// An image shared in the turn: its caption (BLIP) as the file gives it.
	Caption string `json:"blip_caption,omitempty"`
}

// LocomoQA is one question with its evidence turn ids as written.
type LocomoQA struct {
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	Category int      `json:"category"`
}

var sessionKey = regexp.MustCompile(`^session_(\d+)$`)

// LocomoDateLayouts are the layouts of session_N_date_time ("4:10 pm on 2
// June, 2023"), tried in order.
var LocomoDateLayouts = []string{"3:04 pm on 2 January, 2006", "3:04 pm on 2 Jan, 2006", "3:04 PM on 2 January, 2006"}

// ReadLocomo parses a file in the LoCoMo layout: a JSON array of samples,
// each with sample_id, conversation (speaker_a, speaker_b, session_N turn
// lists and session_N_date_time) and qa. Other fields are ignored.
func ReadLocomo(r io.Reader) ([]LocomoConversation, error) {
	var raw []struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []LocomoQA                 `json:"qa"`
	}
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return nil, fmt.Errorf("read locomo: %w", err)
	}
	out := make([]LocomoConversation, 0, len(raw))
	for i, s := range raw {
		if s.SampleID == "" {
			s.SampleID = fmt.Sprintf("sample-%d", i+1)
		}
		c := LocomoConversation{SampleID: s.SampleID, QA: s.QA}
		str := func(k string) string {
			var v string
			if b, ok := s.Conversation[k]; ok {
				_ = json.Unmarshal(b, &v)
			}
			return v
		}
		c.SpeakerA, c.SpeakerB = str("speaker_a"), str("speaker_b")
		for k, b := range s.Conversation {
			m := sessionKey.FindStringSubmatch(k)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			sess := LocomoSession{Number: n, DateTime: str(k + "_date_time")}
			if err := json.Unmarshal(b, &sess.Turns); err != nil {
				return nil, fmt.Errorf("read locomo: %s %s: %w", s.SampleID, k, err)
			}
			for _, l := range LocomoDateLayouts {
				if t, err := time.Parse(l, strings.TrimSpace(sess.DateTime)); err == nil {
					sess.Date = t
					break
				}
			}
			c.Sessions = append(c.Sessions, sess)
		}
		sort.Slice(c.Sessions, func(a, b int) bool { return c.Sessions[a].Number < c.Sessions[b].Number })
		out = append(out, c)
	}
	return out, nil
}

// WriteLocomo writes convs in the layout ReadLocomo reads, for synthetic
// files of one's own (the benchmark's tests write theirs with it).
func WriteLocomo(w io.Writer, convs []LocomoConversation) error {
	type sample struct {
		SampleID     string         `json:"sample_id"`
		Conversation map[string]any `json:"conversation"`
		QA           []LocomoQA     `json:"qa"`
	}
	out := make([]sample, len(convs))
	for i, c := range convs {
		m := map[string]any{"speaker_a": c.SpeakerA, "speaker_b": c.SpeakerB}
		for _, s := range c.Sessions {
			k := "session_" + strconv.Itoa(s.Number)
			m[k], m[k+"_date_time"] = s.Turns, s.DateTime
		}
		out[i] = sample{SampleID: c.SampleID, Conversation: m, QA: c.QA}
	}
	if err := json.NewEncoder(w).Encode(out); err != nil {
		return fmt.Errorf("write locomo: %w", err)
	}
	return nil
}

var evidenceNumbers = regexp.MustCompile(`\d+`)

// NormalizeEvidence maps one evidence entry as written to turn ids of the
// conversation (known). A well-formed id ("D1:3") is kept as it is. Anything
// else is split on separators (";", ",", spaces) and each piece read as D,
// a session number and one or more turn numbers: "D8:6; D9:17" is two ids,
// "D:11:26" is D11:26, "D30:05" is D30:5, "D10:1:2" is D10:1 and D10:2.
// Pieces naming no turn of the conversation are dropped. changed reports
// that the entry was not a known id as written.
func NormalizeEvidence(e string, known map[string]bool) (ids []string, changed bool) {
	if known[e] {
		return []string{e}, false
	}
	for _, piece := range strings.FieldsFunc(e, func(r rune) bool { return r == ';' || r == ',' || r == ' ' || r == '\t' }) {
		nums := evidenceNumbers.FindAllString(piece, -1)
		if len(nums) < 2 {
			continue
		}
		sess, _ := strconv.Atoi(nums[0])
		for _, t := range nums[1:] {
			turn, _ := strconv.Atoi(t)
			if id := fmt.Sprintf("D%d:%d", sess, turn); known[id] {
				ids = append(ids, id)
			}
		}
	}
	return ids, true
}

// LocomoIngest says how turns become memory items: a documented ingestion
// strategy a user can apply to their own chat logs.
type LocomoIngest struct {
	// Speaker prefixes the searchable text with the speaker's name.
	Speaker bool
	// Date adds the session's date ("11 May 2023") to the searchable text.
	Date bool
	// Captions appends the caption of a shared image.
	Captions bool
	// Window, when > 1, also adds one item per Window consecutive turns of a
	// session, starting every Stride turns (default Window/2),
	// in namespace WindowNamespace, naming all its turns in message_ids: a
	// question whose answer spans turns can match the window as a whole.
	Window int
	Stride int
}

// WindowNamespace holds the window items of a multi-granularity ingest.
const WindowNamespace = memory.DefaultWindowNamespace

// ParseLocomoIngest reads a strategy: comma-separated speaker, date,
// captions, window=N, stride=N ("text" alone is none of them).
func ParseLocomoIngest(s string) (LocomoIngest, error) {
	var in LocomoIngest
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "", "text":
		case "speaker":
			in.Speaker = true
		case "date":
			in.Date = true
		case "captions":
			in.Captions = true
		case "window", "stride":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 50 {
				return in, fmt.Errorf("ingest %s: want a number within [1, 50]", p)
			}
			if k == "window" {
				in.Window = n
			} else {
				in.Stride = n
			}
		default:
			return in, fmt.Errorf("unknown ingest option %q (speaker, date, captions, window=N, stride=N)", p)
		}
	}
	return in, nil
}

// DefaultLocomoIngest is the strategy `memento bench locomo` uses: turns
// with speaker, day and image captions in their text, plus windows of 8
// turns at half overlap. The window was chosen by leave-one-conversation-out
// over the 4 development conversations (3 of 4 folds pick 8, the fourth
// 10), stride = window/2 on principle.
var DefaultLocomoIngest = LocomoIngest{Speaker: true, Date: true, Captions: true, Window: 8, Stride: 4}

// Spec is the strategy as ParseLocomoIngest reads it.
func (in LocomoIngest) Spec() string {
	s := strings.TrimPrefix(in.String(), "text+")
	return strings.ReplaceAll(s, "+", ",")
}

func (in LocomoIngest) String() string {
	var parts []string
	if in.Speaker {
		parts = append(parts, "speaker")
	}
	if in.Date {
		parts = append(parts, "date")
	}
	if in.Captions {
		parts = append(parts, "captions")
	}
	if in.Window > 1 {
		parts = append(parts, fmt.Sprintf("window=%d", in.Window), fmt.Sprintf("stride=%d", cmp.Or(in.Stride, max(1, in.Window/2))))
	}
	if len(parts) == 0 {
		return "text"
	}
	return "text+" + strings.Join(parts, "+")
}

// Indexing is the strategy as the memory package applies it.
func (in LocomoIngest) Indexing() memory.ConversationIndexing {
	return memory.ConversationIndexing{WindowNamespace: WindowNamespace, Window: in.Window, Stride: in.Stride, Speaker: in.Speaker, Date: in.Date, Captions: in.Captions}
}

// LocomoConfig is one evaluation run.
type LocomoConfig struct {
	Conversations []LocomoConversation
	// Service is where the turns go; its store should be empty for Tenant.
	Service *memory.Service
	Tenant  string
	Ingest  LocomoIngest
	Modes   []string // default fulltext, vector, hybrid
	Ks      []int    // default 5, 10
	// CountTokens measures the text of the top hits (default bytes/4).
	CountTokens func(string) int
	// Distinct asks search for hits of distinct evidence (DistinctMessages).
	Distinct bool
	// Only, when set, evaluates only these conversations (ingests all).
	Only map[string]bool
	// Progress, when set, gets one line per step.
	Progress io.Writer
}

// LocomoReport is the result. Recall maps "recall@K" to the mean over the
// questions.
type LocomoReport struct {
	Modes map[string]*LocomoModeReport `json:"modes"`
	// Conversations evaluated, questions scored, turns and items ingested.
	Conversations int    `json:"conversations"`
	Questions     int    `json:"questions"`
	Turns         int    `json:"turns"`
	Ingest        string `json:"ingest"`
	Tokenizer     string `json:"tokenizer,omitempty"`
	// Evidence accounting: entries as written, normalised (not a turn id as
	// written), unresolved (naming no turn of the conversation), and
	// questions left out for having no resolvable evidence.
	Evidence struct {
		Entries       int `json:"entries"`
		Normalised    int `json:"normalised"`
		Unresolved    int `json:"unresolved"`
		NoEvidenceQAs int `json:"questions_without_evidence"`
	} `json:"evidence"`
}

// LocomoModeReport is one search mode's figures.
type LocomoModeReport struct {
	Recall     map[string]float64             `json:"-"`
	ByCategory map[string]*LocomoCategoryItem `json:"by_category"`
	// MeanTopTokens is the mean token count of the top-K hits' text, K the
	// largest of Ks.
	MeanTopTokens float64 `json:"-"`
	topK          int
	// ByConversation is recall per conversation (for leave-one-out checks).
	ByConversation map[string]map[string]float64 `json:"by_conversation,omitempty"`
}

// LocomoCategoryItem is one category's figures.
type LocomoCategoryItem struct {
	Questions int                `json:"questions"`
	Recall    map[string]float64 `json:"-"`
}

// MarshalJSON flattens Recall into "recall@K" fields.
func (c *LocomoCategoryItem) MarshalJSON() ([]byte, error) {
	m := map[string]any{"questions": c.Questions}
	for k, v := range c.Recall {
		m[k] = round4(v)
	}
	return json.Marshal(m)
}

// MarshalJSON flattens Recall and names the token figure by its K.
func (m *LocomoModeReport) MarshalJSON() ([]byte, error) {
	o := map[string]any{"by_category": m.ByCategory, fmt.Sprintf("mean_top%d_tokens", m.topK): round4(m.MeanTopTokens)}
	for k, v := range m.Recall {
		o[k] = round4(v)
	}
	if len(m.ByConversation) > 0 {
		bc := map[string]map[string]float64{}
		for c, r := range m.ByConversation {
			bc[c] = map[string]float64{}
			for k, v := range r {
				bc[c][k] = round4(v)
			}
		}
		o["by_conversation"] = bc
	}
	return json.Marshal(o)
}

func round4(v float64) float64 {
	return float64(int64(v*10000+0.5)) / 10000
}

func recallKey(k int) string { return fmt.Sprintf("recall@%d", k) }

// LocomoCategories are the categories scored; 5 (adversarial) has no
// evidence to find.
var LocomoCategories = []int{1, 2, 3, 4}

// RunLocomo ingests every turn through the memory service, then scores
// every question of categories 1-4 in every mode.
func RunLocomo(ctx context.Context, cfg LocomoConfig) (*LocomoReport, error) {
	if cfg.Service == nil {
		return nil, errors.New("locomo: no memory service")
	}
	if len(cfg.Modes) == 0 {
		cfg.Modes = []string{memory.ModeFulltext, memory.ModeVector, memory.ModeHybrid}
	}
	if len(cfg.Ks) == 0 {
		cfg.Ks = []int{5, 10}
	}
	ks := append([]int(nil), cfg.Ks...)
	sort.Ints(ks)
	maxK := ks[len(ks)-1]
	if ks[0] <= 0 || maxK > memory.MaxSearchK {
		return nil, fmt.Errorf("locomo: k must be within [1, %d]", memory.MaxSearchK)
	}
	count := cfg.CountTokens
	if count == nil {
		count = func(s string) int { return (len(s) + 3) / 4 }
	}
	if cfg.Tenant == "" {
		cfg.Tenant = "locomo"
	}
	rep := &LocomoReport{Modes: map[string]*LocomoModeReport{}, Ingest: cfg.Ingest.String()}
	for _, c := range cfg.Conversations {
		n, err := ingestLocomo(ctx, cfg, c)
		if err != nil {
			return nil, err
		}
		rep.Turns += n
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "ingested %s: %d turns\n", c.SampleID, n)
		}
	}

	type question struct {
		conv     string
		text     string
		category int
		evidence map[string]bool
	}
	var qs []question
	for _, c := range cfg.Conversations {
		if cfg.Only != nil && !cfg.Only[c.SampleID] {
			continue
		}
		rep.Conversations++
		known := map[string]bool{}
		for _, s := range c.Sessions {
			for _, t := range s.Turns {
				known[t.DiaID] = true
			}
		}
		for _, qa := range c.QA {
			if !isScored(qa.Category) || strings.TrimSpace(qa.Question) == "" {
				continue
			}
			ev := map[string]bool{}
			for _, e := range qa.Evidence {
				rep.Evidence.Entries++
				ids, changed := NormalizeEvidence(e, known)
				if changed {
					rep.Evidence.Normalised++
				}
				if len(ids) == 0 {
					rep.Evidence.Unresolved++
				}
				for _, id := range ids {
					ev[id] = true
				}
			}
			if len(ev) == 0 {
				rep.Evidence.NoEvidenceQAs++
				continue
			}
			qs = append(qs, question{conv: c.SampleID, text: qa.Question, category: qa.Category, evidence: ev})
		}
	}
	rep.Questions = len(qs)

	for _, mode := range cfg.Modes {
		mr := &LocomoModeReport{Recall: map[string]float64{}, ByCategory: map[string]*LocomoCategoryItem{}, topK: maxK, ByConversation: map[string]map[string]float64{}}
		convN := map[string]int{}
		var tokens float64
		for _, q := range qs {
			res, err := cfg.Service.Search(ctx, cfg.Tenant, memory.SearchQuery{Query: q.text, SubjectID: q.conv, K: maxK, Mode: mode, DistinctMessages: cfg.Distinct})
			if err != nil {
				return nil, fmt.Errorf("locomo: search %s in %s: %w", q.conv, mode, err)
			}
			cat := strconv.Itoa(q.category)
			ci := mr.ByCategory[cat]
			if ci == nil {
				ci = &LocomoCategoryItem{Recall: map[string]float64{}}
				mr.ByCategory[cat] = ci
			}
			ci.Questions++
			if mr.ByConversation[q.conv] == nil {
				mr.ByConversation[q.conv] = map[string]float64{}
			}
			convN[q.conv]++
			for _, k := range ks {
				r := evidenceRecall(res.Items, k, q.evidence)
				mr.Recall[recallKey(k)] += r
				ci.Recall[recallKey(k)] += r
				mr.ByConversation[q.conv][recallKey(k)] += r
			}
			for i, h := range res.Items {
				if i >= maxK {
					break
				}
				tokens += float64(count(h.Text))
			}
		}
		if len(qs) > 0 {
			for k := range mr.Recall {
				mr.Recall[k] /= float64(len(qs))
			}
			tokens /= float64(len(qs))
		}
		for _, ci := range mr.ByCategory {
			for k := range ci.Recall {
				ci.Recall[k] /= float64(ci.Questions)
			}
		}
		for c, r := range mr.ByConversation {
			for k := range r {
				r[k] /= float64(convN[c])
			}
		}
		mr.MeanTopTokens = tokens
		rep.Modes[mode] = mr
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "searched %d questions in %s\n", len(qs), mode)
		}
	}
	return rep, nil
}

func isScored(cat int) bool {
	for _, c := range LocomoCategories {
		if c == cat {
			return true
		}
	}
	return false
}

// evidenceRecall is the fraction of evidence named by the message_ids of
// the first k hits.
func evidenceRecall(hits []memory.Hit, k int, evidence map[string]bool) float64 {
	found := map[string]bool{}
	for i, h := range hits {
		if i >= k {
			break
		}
		for _, id := range h.Provenance.MessageIDs {
			if evidence[id] {
				found[id] = true
			}
		}
	}
	return float64(len(found)) / float64(len(evidence))
}

// ingestLocomo adds every turn of c (and its windows) as claims of subject
// c.SampleID, through memory.ConversationInputs; it returns the turns added.
func ingestLocomo(ctx context.Context, cfg LocomoConfig, c LocomoConversation) (int, error) {
	var turns []memory.ConversationTurn
	for _, s := range c.Sessions {
		for _, t := range s.Turns {
			turns = append(turns, memory.ConversationTurn{ID: t.DiaID, Session: strconv.Itoa(s.Number), Speaker: t.Speaker, Text: t.Text, Caption: t.Caption, At: s.Date})
		}
	}
	n := 0
	for _, in := range memory.ConversationInputs(c.SampleID, turns, cfg.Ingest.Indexing(), memory.ValidatedImported) {
		if _, err := cfg.Service.Add(ctx, cfg.Tenant, in); err != nil {
			return n, fmt.Errorf("locomo: add %s of %s: %w", in.Key, c.SampleID, err)
		}
		if in.Namespace != WindowNamespace {
			n++
		}
	}
	return n, nil
}
