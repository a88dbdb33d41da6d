package memory

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Importing a conversation verbatim, so search can find what was said. Two
// granularities (a documented strategy; `memento bench locomo` measures it):
// one item per turn, and optionally one per window of consecutive turns of a
// session, each naming all its turns in provenance.message_ids. A question
// whose answer spans an exchange ("what did X recommend, and did Y try
// it?") matches the window as a whole where no single turn holds all its
// words; search with DistinctMessages then keeps a turn from taking a slot
// after a window that already holds it.

// ConversationTurn is one message of a conversation.
type ConversationTurn struct {
	ID      string // the message id: the turn's key and provenance
	Session string // windows never cross a change of session
	Speaker string
	Text    string
	Caption string    // a caption of an image shared in the turn
	At      time.Time // when it was said (zero: unknown)
}

// ConversationIndexing says how turns become items.
type ConversationIndexing struct {
	Namespace       string // of the turns; "" is DefaultNamespace
	WindowNamespace string // of the windows; "" is DefaultWindowNamespace
	// Window, when > 1, adds an item per Window consecutive turns of a
	// session, starting every Stride turns (0: Window/2, half overlap).
	Window, Stride int
	// Speaker, Date and Captions put the speaker's name, the day and an
	// image's caption into the searchable text: questions name people and
	// times ("when did Ann ...").
	Speaker, Date, Captions bool
}

// DefaultWindowNamespace holds window items.
const DefaultWindowNamespace = "windows"

// TurnText is the searchable text of a turn.
func (ix ConversationIndexing) TurnText(t ConversationTurn) string {
	var b strings.Builder
	if ix.Date && !t.At.IsZero() {
		b.WriteString("[" + t.At.Format("2 January 2006") + "] ")
	}
	ix.writeTurn(&b, t)
	return b.String()
}

func (ix ConversationIndexing) writeTurn(b *strings.Builder, t ConversationTurn) {
	if ix.Speaker && t.Speaker != "" {
		b.WriteString(t.Speaker + ": ")
	}
	b.WriteString(strings.TrimSpace(t.Text))
	if c := strings.TrimSpace(t.Caption); ix.Captions && c != "" {
		b.WriteString(" [shares a photo: " + c + "]")
	}
}

func (ix ConversationIndexing) stride() int {
	if ix.Stride > 0 {
		return ix.Stride
	}
	return max(1, ix.Window/2)
}

// ConversationInputs returns the items of subject's turns, in order: every
// turn with an id and some text, then, session by session, the windows.
// Provenance is source_type message, validated_by validatedBy (imported,
// user_stated...), valid_from the turn's time.
func ConversationInputs(subject string, turns []ConversationTurn, ix ConversationIndexing, validatedBy string) []AddInput {
	var kept []ConversationTurn
	for _, t := range turns {
		t.ID = strings.TrimSpace(t.ID)
		if t.ID != "" && (strings.TrimSpace(t.Text) != "" || strings.TrimSpace(t.Caption) != "") {
			kept = append(kept, t)
		}
	}
	var out []AddInput
	seen := map[string]int{}
	for _, t := range kept {
		// A message id seen twice (a log's glitch) gets a key of its own, so
		// the second turn does not supersede the first; both name the id.
		key := t.ID
		if seen[t.ID]++; seen[t.ID] > 1 {
			key = fmt.Sprintf("%s#%d", t.ID, seen[t.ID])
		}
		v := map[string]any{"speaker": t.Speaker, "text": t.Text}
		if t.Session != "" {
			v["session"] = t.Session
		}
		if t.Caption != "" {
			v["image_caption"] = t.Caption
		}
		value, _ := json.Marshal(v) // strings only: cannot fail
		out = append(out, conversationInput(subject, ix.Namespace, key, value, ix.TurnText(t), []string{t.ID}, t.At, validatedBy))
	}
	if ix.Window <= 1 {
		return out
	}
	wns := ix.WindowNamespace
	if wns == "" {
		wns = DefaultWindowNamespace
	}
	for start := 0; start < len(kept); {
		end := start
		for end < len(kept) && kept[end].Session == kept[start].Session {
			end++
		}
		sess := kept[start:end]
		for i := 0; i < len(sess); i += ix.stride() {
			w := sess[i:min(i+ix.Window, len(sess))]
			var b strings.Builder
			if ix.Date && !w[0].At.IsZero() {
				b.WriteString("[" + w[0].At.Format("2 January 2006") + "]\n")
			}
			ids := make([]string, len(w))
			for j, t := range w {
				if j > 0 {
					b.WriteString("\n")
				}
				ix.writeTurn(&b, t)
				ids[j] = t.ID
			}
			key := "window:" + ids[0] + ".." + ids[len(ids)-1]
			value, _ := json.Marshal(map[string]any{"session": w[0].Session, "turns": ids})
			out = append(out, conversationInput(subject, wns, key, value, b.String(), ids, w[0].At, validatedBy))
			if i+ix.Window >= len(sess) {
				break
			}
		}
		start = end
	}
	return out
}

func conversationInput(subject, ns, key string, value json.RawMessage, text string, ids []string, at time.Time, validatedBy string) AddInput {
	in := AddInput{
		SubjectID: subject,
		Namespace: ns,
		Key:       key,
		Value:     value,
		Text:      truncateText(text, MaxTextBytes),
		Provenance: Provenance{
			SourceType:  SourceMessage,
			SourceID:    key,
			MessageIDs:  ids,
			ValidatedBy: validatedBy,
		},
	}
	if !at.IsZero() {
		in.ValidFrom = &at
	}
	return in
}

// truncateText cuts s to at most n bytes on a rune boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
