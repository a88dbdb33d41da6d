package giftgenius

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/mcp"
)

// Planner is GiftGenius's scripted model: deterministic and offline. Like a
// real model it knows only the request, the context the loop built (system
// prompt, session state, history, the user's message) and the results of
// the tools it called this turn, and it decides the next call or the
// answer from them. It reads English with simple patterns (ParseFacts).
//
// Its policy: read the stored profile (memory_get) before asking anything;
// ask only for what is still missing; keep the draft in the session; save a
// complete profile that changed (memory_add, citing the user's messages);
// search, filter, present up to three options; on a choice, finalize.
func Planner() agent.ModelFunc {
	return func(_ context.Context, req llm.ChatRequest) (llm.ChatResponse, error) {
		v, err := readTurn(req.Messages)
		if err != nil {
			return llm.ChatResponse{}, err
		}
		return v.next(), nil
	}
}

// MaxShown is how many options an answer presents.
const MaxShown = 3

// stateHeader starts the context part that shows the session state.
const stateHeader = "Session state:\n"

type storedClaim struct {
	MemoryID string  `json:"memory_id"`
	Key      string  `json:"key"`
	Value    Profile `json:"value"`
}

type listedMessage struct {
	Seq     int64  `json:"seq"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// turnView is what the planner knows at one step of a turn.
type turnView struct {
	text string
	// firstTurn: the context holds no earlier message of this session.
	firstTurn bool
	// lastAnswer is the agent's latest answer before this turn.
	lastAnswer string
	// start is the state the turn began with; state is the latest seen.
	start, state State
	haveState    bool
	patchFailed  bool

	memGot bool
	stored []storedClaim
	listed []listedMessage

	saveTried bool
	saved     string // the outcome, when memory_add answered
	saveErr   string

	search    *searchOut
	searchErr string
	filter    *filterOut
	filterErr string
	final     *finalizeOut
	finalErr  string
}

func readTurn(msgs []llm.Message) (*turnView, error) {
	q := -1
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			q = i
		}
	}
	if q < 0 {
		return nil, errors.New("giftgenius planner: the request holds no user message")
	}
	v := &turnView{text: msgs[q].Content, firstTurn: true}
	for _, m := range msgs[:q] {
		switch {
		case m.Role == llm.RoleSystem && strings.HasPrefix(m.Content, stateHeader):
			if json.Unmarshal([]byte(strings.TrimPrefix(m.Content, stateHeader)), &v.state) == nil {
				v.haveState = true
			}
		case m.Role == llm.RoleUser:
			v.firstTurn = false
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) == 0:
			v.firstTurn = false
			v.lastAnswer = m.Content
		}
	}
	v.start = v.state
	names := map[string]string{}
	for _, m := range msgs[q+1:] {
		if m.Role == llm.RoleAssistant {
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
			continue
		}
		if m.Role != llm.RoleTool {
			continue
		}
		v.read(names[m.ToolCallID], m.Content)
	}
	return v, nil
}

// read takes in one tool result of this turn.
func (v *turnView) read(name, content string) {
	var e struct {
		Error *mcp.ToolError `json:"error"`
	}
	_ = json.Unmarshal([]byte(content), &e)
	failed := ""
	if e.Error != nil {
		failed = e.Error.Type + ": " + e.Error.Detail
	}
	switch name {
	case "session_get", "session_patch":
		var out struct {
			State State `json:"state"`
		}
		if failed == "" && json.Unmarshal([]byte(content), &out) == nil {
			v.state, v.haveState = out.State, true
		} else if name == "session_patch" {
			v.patchFailed = true
		}
	case "memory_get":
		var out struct {
			Memories []storedClaim `json:"memories"`
		}
		v.memGot = true
		if failed == "" {
			_ = json.Unmarshal([]byte(content), &out)
			v.stored = out.Memories
		}
	case "messages_list":
		var out struct {
			Messages []listedMessage `json:"messages"`
		}
		if failed == "" {
			_ = json.Unmarshal([]byte(content), &out)
			v.listed = out.Messages
		}
	case "memory_add":
		v.saveTried = true
		var out struct {
			Outcome string `json:"outcome"`
		}
		if failed == "" && json.Unmarshal([]byte(content), &out) == nil {
			v.saved = out.Outcome
		} else {
			v.saveErr = failed
		}
	case ToolSearch:
		var out searchOut
		if failed == "" && json.Unmarshal([]byte(content), &out) == nil {
			v.search = &out
		} else {
			v.searchErr = failed
		}
	case ToolFilter:
		var out filterOut
		if failed == "" && json.Unmarshal([]byte(content), &out) == nil {
			v.filter = &out
		} else {
			v.filterErr = failed
		}
	case ToolFinalize:
		var out finalizeOut
		if failed == "" && json.Unmarshal([]byte(content), &out) == nil {
			v.final = &out
		} else {
			v.finalErr = failed
		}
	}
}

// next is the planner's decision: a tool call or the answer.
func (v *turnView) next() llm.ChatResponse {
	if !v.haveState {
		return agent.CallTool("session_get", map[string]any{})
	}
	switch {
	case v.final != nil:
		return agent.Answer(v.confirm())
	case v.finalErr != "":
		return agent.Answer("I could not record that choice (" + v.finalErr + "). Which of the options shown would you like?")
	}
	st := v.state
	// A choice among the options shown.
	if v.search == nil && st.Step == StepFiltered && len(st.KeptIDs) > 0 {
		offered, names := listedOptions(v.lastAnswer)
		if len(offered) == 0 {
			offered = st.KeptIDs[:min(MaxShown, len(st.KeptIDs))]
		}
		if id, ok := ParseChoice(v.text, offered, names); ok {
			return agent.CallTool(ToolFinalize, map[string]any{"product_id": id})
		}
	}

	facts := ParseFacts(v.text)
	var draft Profile
	if st.Profile != nil {
		draft = *st.Profile
	}
	recipient := facts.Recipient
	if recipient == "" {
		recipient = draft.Recipient
	}
	// What is known is read before anything is asked.
	if !v.memGot {
		args := map[string]any{"namespace": Namespace}
		if recipient != "" {
			args["key"] = RecipientKey(recipient)
		}
		return agent.CallTools(agent.ToolCall("memory_get", args), agent.ToolCall("messages_list", map[string]any{"limit": 50}))
	}
	var stored *storedClaim
	for i := range v.stored {
		c := &v.stored[i]
		if recipient != "" && c.Key == RecipientKey(recipient) || recipient == "" && facts.Same && len(v.stored) == 1 {
			stored = c
		}
	}

	p := Profile{Recipient: recipient}
	if stored != nil {
		p = stored.Value
	}
	if draft.Recipient != "" && RecipientKey(draft.Recipient) == RecipientKey(p.Recipient) {
		p = overlay(p, draft)
	}
	if v.start.ChoiceID != "" {
		// A new round after a final choice: the deadline was that occasion's.
		p.DeliverWithinDays = 0
	}
	p = overlay(p, Profile{Recipient: facts.Recipient, Relation: facts.Relation, Interests: facts.Interests,
		BudgetEUR: facts.BudgetEUR, Region: facts.Region, DeliverWithinDays: facts.Days})

	missing := p.Missing()
	if facts.BiggerBudget && !slices.Contains(missing, FieldBudget) {
		missing = append(missing, FieldBudget)
	}
	changed := st.Profile == nil || !st.Profile.Equal(p)
	patch := agent.ToolCall("session_patch", map[string]any{"patch": map[string]any{"step": StepCollect, "profile_draft": p.patch()}})
	if len(missing) > 0 {
		if changed && !v.patchFailed {
			return agent.CallTools(patch)
		}
		return agent.Answer(v.ask(p, missing, stored))
	}

	if v.search == nil && v.searchErr == "" {
		patch = agent.ToolCall("session_patch", map[string]any{"patch": map[string]any{"step": StepProfile, "profile_draft": p.patch()}})
		search := agent.ToolCall(ToolSearch, map[string]any{"interests": p.Interests})
		needSave := stored == nil || !stored.Value.Lasting().Equal(p.Lasting())
		if needSave && !v.saveTried {
			if seqs := evidence(v.listed, p); len(seqs) > 0 {
				add := map[string]any{"namespace": Namespace, "key": p.Key(), "value": p.Lasting(), "text": p.Lasting().Summary(),
					"category": "relation", "message_seqs": seqs}
				if stored != nil {
					add["supersedes"] = stored.MemoryID
				}
				calls := []llm.ToolCall{agent.ToolCall("memory_add", add)}
				if changed && !v.patchFailed {
					calls = append([]llm.ToolCall{patch}, calls...)
				}
				return agent.CallTools(calls...)
			}
		}
		if changed && !v.patchFailed {
			return agent.CallTools(patch, search)
		}
		return agent.CallTools(search)
	}
	if v.searchErr != "" {
		return agent.Answer(fmt.Sprintf("I found nothing in the catalogue for %s (%s). Is %s into anything else?", strings.Join(p.Interests, ", "), v.searchErr, p.Recipient))
	}
	if v.filter == nil && v.filterErr == "" {
		ids := make([]string, len(v.search.Candidates))
		for i, c := range v.search.Candidates {
			ids[i] = c.ID
		}
		args := map[string]any{"ids": ids, "budget_eur": p.BudgetEUR, "region": p.Region}
		if p.DeliverWithinDays > 0 {
			args["deliver_within_days"] = p.DeliverWithinDays
		}
		return agent.CallTool(ToolFilter, args)
	}
	if v.filterErr != "" {
		return agent.Answer("I could not filter the candidates (" + v.filterErr + ").")
	}
	return agent.Answer(v.present(p, stored))
}

// overlay returns p with what q sets.
func overlay(p, q Profile) Profile {
	if q.Recipient != "" {
		p.Recipient = q.Recipient
	}
	if q.Relation != "" {
		p.Relation = q.Relation
	}
	if len(q.Interests) > 0 {
		p.Interests = slices.Clone(q.Interests)
	}
	if q.BudgetEUR > 0 {
		p.BudgetEUR = q.BudgetEUR
	}
	if q.Region != "" {
		p.Region = q.Region
	}
	if q.DeliverWithinDays > 0 {
		p.DeliverWithinDays = q.DeliverWithinDays
	}
	return p
}

// evidence is the seqs of the user's messages that stated a value the
// profile holds: the provenance of the claim.
func evidence(msgs []listedMessage, p Profile) []int64 {
	var seqs []int64
	for _, m := range msgs {
		if m.Role != "user" {
			continue
		}
		f := ParseFacts(m.Content)
		if f.Recipient != "" && RecipientKey(f.Recipient) == p.Key() ||
			slices.ContainsFunc(f.Interests, func(t string) bool { return slices.Contains(p.Interests, t) }) ||
			f.BudgetEUR > 0 && f.BudgetEUR == p.BudgetEUR || f.Region != "" && f.Region == p.Region {
			seqs = append(seqs, m.Seq)
		}
	}
	if len(seqs) > mcp.MaxEvidence {
		seqs = seqs[len(seqs)-mcp.MaxEvidence:]
	}
	return seqs
}

// ask asks for what is missing, and only that.
func (v *turnView) ask(p Profile, missing []string, stored *storedClaim) string {
	var b strings.Builder
	name := p.Recipient
	switch {
	case stored == nil && name == "" && ParseFacts(v.text).Same:
		b.WriteString("I have no earlier gift search of yours on record. ")
	case stored != nil:
		fmt.Fprintf(&b, "I remember %s. ", stored.Value.Summary())
	case name != "":
		fmt.Fprintf(&b, "Happy to help you find a gift for %s! ", name)
	default:
		b.WriteString("Happy to help you find a gift! ")
	}
	into := "What is " + name + " into (hobbies, interests)?"
	if name == "" {
		into = "What are they into (hobbies, interests)?"
	}
	var qs []string
	for _, f := range missing {
		switch f {
		case FieldRecipient:
			q := "Who is the gift for?"
			if len(v.stored) > 1 {
				var names []string
				for _, c := range v.stored {
					names = append(names, c.Value.Recipient)
				}
				q = "Who is the gift for: " + strings.Join(names, " or ") + "?"
			}
			qs = append(qs, q)
		case FieldInterests:
			qs = append(qs, into)
		case FieldBudget:
			if p.BudgetEUR > 0 {
				qs = append(qs, fmt.Sprintf("How much would you like to spend now, in euros (it was %d)?", p.BudgetEUR))
			} else {
				qs = append(qs, "What is your budget, in euros?")
			}
		case FieldRegion:
			qs = append(qs, "Which country should it ship to?")
		}
	}
	b.WriteString("To suggest something good I need to know: ")
	b.WriteString(strings.Join(qs, " "))
	return b.String()
}

// present shows the filtered options.
func (v *turnView) present(p Profile, stored *storedClaim) string {
	var b strings.Builder
	if v.firstTurn && v.start.Profile != nil {
		b.WriteString("Welcome back! ")
	}
	if stored != nil {
		fmt.Fprintf(&b, "I remember %s.", stored.Value.Summary())
		if stored.Value.BudgetEUR != p.BudgetEUR {
			fmt.Fprintf(&b, " Budget updated from %d to %d EUR.", stored.Value.BudgetEUR, p.BudgetEUR)
		}
		b.WriteString("\n")
	} else if v.saved != "" {
		fmt.Fprintf(&b, "Thanks! I noted %s's profile for next time.\n", p.Recipient)
	}
	if ex := v.search.Excluded; len(ex) > 0 {
		var names []string
		for _, e := range ex {
			names = append(names, e.Name)
		}
		fmt.Fprintf(&b, "Last time you chose the %s, so I left it out.\n", strings.Join(names, " and the "))
	}
	where := fmt.Sprintf("within %d EUR that ship to %s", p.BudgetEUR, p.Region)
	if p.DeliverWithinDays > 0 {
		where += fmt.Sprintf(" in %d days or less", p.DeliverWithinDays)
	}
	kept := v.filter.Kept
	if len(kept) == 0 {
		fmt.Fprintf(&b, "Nothing in the catalogue for %s fits %s: %d candidates were dropped (price, shipping or delivery time). A bigger budget or a later delivery would open up options.", p.Recipient, where, len(v.filter.Dropped))
		return b.String()
	}
	fmt.Fprintf(&b, "Here are gifts for %s %s:\n", p.Recipient, where)
	for i, k := range kept[:min(MaxShown, len(kept))] {
		fmt.Fprintf(&b, "%d. %s — %d EUR (%s)\n", i+1, k.Name, k.PriceEUR, k.ID)
	}
	b.WriteString("Tell me which one you'd like.")
	return b.String()
}

// confirm confirms a final choice.
func (v *turnView) confirm() string {
	f := v.final
	who := f.Recipient
	if who == "" {
		who = "your recipient"
	}
	return fmt.Sprintf("Done: the %s (%d EUR) for %s, delivered to %s in %d days. I kept %s's profile, so next time you won't have to tell me again.",
		f.Name, f.PriceEUR, who, f.Region, f.DeliveryDays, who)
}
