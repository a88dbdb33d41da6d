package refund

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/tokens"
)

// The customer dialog of a refund is a session of the customer: the support
// chat wrote it before the run started. It is long, so the workflow reads
// the older part through a summary (a verifiable cache of the messages) and
// the recent part raw.
const (
	// DialogModel is the decide step's offline model. It has no tokenizer
	// of its own, so counts are approximate (tokens.Approx); an engine that
	// serves the workflow counts summaries for it too (CompactionOptions), and
	// so loads no tokenizer table, which a worker restarted often would pay
	// at every start.
	DialogModel = "refund-offline"
	// DialogWindow is its window for the dialog: compact.Trigger decides
	// what part of the dialog is summarised.
	DialogWindow = 1024
)

// DialogReserves are the parts of the decide step's window the dialog may not use.
var DialogReserves = compact.Reserves{System: 120, Retrieved: 200, Answer: 100}

// CompactionOptions are the summary settings of an engine that serves the
// refund workflow: summaries counted for DialogModel, their text within the
// share of the dialog's budget that compact.Trigger leaves to summaries, so
// that summary plus recent messages fit the window (and a step redone after
// a crash finds nothing more to compact).
func CompactionOptions() compact.Options {
	history := DialogWindow - DialogReserves.Total()
	return compact.Options{Model: DialogModel, Budget: history - int(float64(history)*compact.DefaultKeep)}
}

// DialogSession is the session id of an order's dialog; its user is the order's customer.
func DialogSession(orderID string) string { return "dialog-" + orderID }

// firstOrderOf tells whether n is the first demo order of its customer
// (OrderFor: the customer of order n is n mod 97): only those dialogs state
// and confirm a preference; later orders of the customer rely on memory.
func firstOrderOf(n int) bool { return n <= 97 }

// Dialog is the demo dialog of an order, as the support chat recorded it:
// the complaint, the amount paid, a refusal of store credit, long waits for
// the carrier, and (in the first order of a customer) a refund-method
// preference the customer confirms when asked. Messages whose meaning a
// chat widget captured carry it in metadata ("states", "confirms").
func Dialog(o Order) []session.MessageInput {
	n := orderNumber(o.OrderID)
	amount := FormatCents(o.AmountCents, o.Currency)
	var msgs []session.MessageInput
	say := func(role, text string, meta ...string) {
		m := session.MessageInput{Role: role, Content: text}
		if len(meta) > 0 {
			m.Metadata = json.RawMessage(meta[0])
		}
		msgs = append(msgs, m)
	}
	say("user", fmt.Sprintf("Hello, I am writing about my order %s.", o.OrderID))
	say("assistant", "Hello! I am sorry to hear there is a problem. What happened with the order?")
	say("user", "The parcel never arrived. The tracking page has said in transit for three weeks now.")
	say("assistant", "Thank you for telling me. Let me look at the shipment.")
	say("user", fmt.Sprintf("I paid %s for it and I would like my money back.", amount))
	say("assistant", "I understand. I will check what the carrier can tell us first.")
	if firstOrderOf(n) {
		say("user", "Please send the money back to my original payment method.",
			fmt.Sprintf(`{"states":{"key":%q,"value":%q}}`, PreferenceKey, MethodOriginal))
		say("assistant", "Noted. Shall I remember that for your future refunds too?")
	}
	for i := range 30 {
		f := filler[(n+i)%len(filler)]
		say("user", f[0])
		say("assistant", f[1])
	}
	say("user", "I do not want store credit or a voucher, only a refund.")
	say("assistant", "Understood, no store credit.")
	if firstOrderOf(n) {
		say("user", "And yes, please remember my refund method for next time.",
			fmt.Sprintf(`{"confirms":%q}`, PreferenceKey))
		say("assistant", "I will keep it on file.")
	}
	say("user", "Is there any news on my refund?")
	say("assistant", "I am checking our refund policy now and will come back to you shortly.")
	return msgs
}

// filler is the small talk of a long support chat: what makes the dialog
// long, and what a summary may drop.
var filler = [][2]string{
	{"Could you ask the carrier where it is?", "I have sent them a request, it can take a moment."},
	{"The last scan was at the depot, nothing after that.", "Yes, I see the same scan on my side."},
	{"It is really annoying, I needed it for the weekend.", "I am sorry about that, I understand it is frustrating."},
	{"Do they usually take this long?", "Usually a parcel is delivered within five working days."},
	{"My neighbour did not get anything either.", "Thank you for checking with your neighbour."},
	{"Is the address on the order right?", "Yes, the address matches the one in your account."},
	{"I am still waiting, sorry for the many messages.", "No problem at all, take your time."},
	{"Can you see anything new on your side?", "Not yet, the carrier has not answered."},
	{"The weather was bad last week, maybe that is why.", "That may well have delayed the depot."},
	{"Should I wait a few more days?", "Let me check our rules for lost parcels first."},
	{"Thanks for looking into it.", "You are welcome, that is what we are here for."},
	{"Any news from the carrier yet?", "Nothing yet, I am sorry."},
	{"I checked the mailbox again this morning.", "Thank you, that helps us rule it out."},
	{"Could it have gone to a pick-up point?", "I looked, it is not at any pick-up point near you."},
	{"I will wait for your answer then.", "Thank you for your patience."},
}

// FormatCents writes an amount as a customer does: "89.19 EUR".
func FormatCents(cents int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", cents/100, cents%100, currency)
}

func orderNumber(orderID string) int {
	var n int
	_, _ = fmt.Sscanf(strings.TrimPrefix(orderID, "order-"), "%d", &n)
	return n
}

// OpenDialog records the demo dialog of an order in its session unless it
// is there: the support chat's part, before a run starts. Two demo workers
// starting at the same instant may both write it (the session API has no
// create-only write); a dialog recorded twice is only longer.
func OpenDialog(ctx context.Context, sessions *session.Service, tenantID string, o Order) error {
	sid := DialogSession(o.OrderID)
	s, err := sessions.Get(ctx, tenantID, sid, o.Customer)
	switch {
	case err == nil && s.MessageCount > 0:
		return nil
	case err != nil && !errors.Is(err, session.ErrNotFound):
		return fmt.Errorf("read dialog %s: %w", sid, err)
	case err != nil:
		// The dialog lives as long as a session may.
		ttl := sessions.Options().MaxTTL
		if _, _, err := sessions.Put(ctx, tenantID, sid, session.PutRequest{UserID: o.Customer, App: "support-chat", TTL: ttl}); err != nil {
			return fmt.Errorf("open dialog %s: %w", sid, err)
		}
	}
	if _, err := sessions.Append(ctx, tenantID, sid, o.Customer, Dialog(o)); err != nil {
		return fmt.Errorf("record dialog %s: %w", sid, err)
	}
	return nil
}

// SummaryRef is what a run keeps of a summary it read: the id, the range,
// the source digest and a digest of the content it relied on. The summary
// itself stays in the summary store, a cache the run never writes back from.
type SummaryRef struct {
	SummaryID    string        `json:"summary_id"`
	Covers       compact.Range `json:"covers"`
	SourceDigest string        `json:"source_digest"`
	Digest       string        `json:"digest"`
}

// DialogRef is the state field "dialog": where the dialog is, which part of
// it is summarised (Summaries, contiguous from the dialog's first seq) and
// which part is read raw (RawFrom..RawTo), and why (Plan).
type DialogRef struct {
	SessionID string       `json:"session_id"`
	UserID    string       `json:"user_id"`
	Summaries []SummaryRef `json:"summaries"`
	RawFrom   int64        `json:"raw_from"`
	RawTo     int64        `json:"raw_to"`
	Plan      string       `json:"plan"`
}

// Owner is the dialog as the summary service names it.
func (d DialogRef) Owner() compact.Owner { return compact.SessionOwner(d.SessionID, d.UserID) }

// SummaryDigest is the content digest of a summary as it reads now
// (compact.ContentDigest). The run keeps the one it relied on: compact.Verify
// catches a summary changed in the store after it was sealed, and the kept
// digest also tells a run that its summary was replaced (rebuilt) since.
func SummaryDigest(s compact.Summary) string {
	d, err := compact.ContentDigest(s)
	if err != nil {
		return "" // never equal to a kept digest: the summary is read raw
	}
	return d
}

func summaryRef(s compact.Summary) SummaryRef {
	return SummaryRef{SummaryID: s.SummaryID, Covers: s.Covers, SourceDigest: s.SourceDigest, Digest: SummaryDigest(s)}
}

// compactDialog makes sure the older part of the dialog is summarised as
// far as the decide step's window needs (compact.Trigger), and returns the
// reference the run keeps. It writes only to the summary store.
func compactDialog(ctx context.Context, sums *compact.Service, tenantID, sessionID, userID string) (DialogRef, error) {
	ref := DialogRef{SessionID: sessionID, UserID: userID, Summaries: []SummaryRef{}}
	owner := ref.Owner()
	first, last, err := sums.Bounds(ctx, tenantID, owner)
	if errors.Is(err, session.ErrNotFound) || err == nil && last == 0 {
		// Session memory expires; the run does not depend on it.
		ref.RawFrom, ref.Plan = 1, "no dialog: the session is gone or empty"
		return ref, nil
	}
	if err != nil {
		return ref, fmt.Errorf("dialog %s: %w", sessionID, err)
	}
	usable, err := sums.Usable(ctx, tenantID, owner)
	if err != nil {
		return ref, fmt.Errorf("summaries of dialog %s: %w", sessionID, err)
	}
	rawFrom, sumTokens := first, 0
	for _, s := range usable {
		rawFrom, sumTokens = s.Covers.ToSeq+1, sumTokens+s.Tokens
	}
	items, err := sums.Items(ctx, tenantID, owner, rawFrom, last)
	if err != nil {
		return ref, fmt.Errorf("dialog %s: %w", sessionID, err)
	}
	plan, err := compact.Trigger(compact.TriggerInput{Model: DialogModel, ContextWindow: DialogWindow, Reserves: DialogReserves,
		SummaryTokens: sumTokens, History: compact.CountItems(DialogModel, items)})
	if err != nil {
		return ref, err
	}
	if plan.Compact {
		s, _, err := sums.Compact(ctx, tenantID, owner, compact.CompactRequest{FromSeq: plan.Range.FromSeq, ToSeq: plan.Range.ToSeq, Compactor: compact.ExtractiveName})
		if err != nil {
			return ref, fmt.Errorf("compact dialog %s: %w", sessionID, err)
		}
		usable = append(usable, s)
		rawFrom = s.Covers.ToSeq + 1
	}
	for _, s := range usable {
		ref.Summaries = append(ref.Summaries, summaryRef(s))
	}
	ref.RawFrom, ref.RawTo, ref.Plan = rawFrom, last, plan.String()
	return ref, nil
}

// SummaryCheck is the verdict on one summary a run relied on.
type SummaryCheck struct {
	SummaryID string `json:"summary_id"`
	OK        bool   `json:"ok"`
	Reason    string `json:"reason,omitempty"`
}

// VerifyDialog checks every summary the run's dialog reference names:
// compact.Verify (the range is whole, continues the chain, and its source
// messages are unchanged) and the content digest the run recorded. It
// writes nothing but a failing summary's stale mark, in the summary store.
func VerifyDialog(ctx context.Context, sums *compact.Service, tenantID string, ref DialogRef) ([]SummaryCheck, error) {
	out := make([]SummaryCheck, 0, len(ref.Summaries))
	for _, r := range ref.Summaries {
		c := SummaryCheck{SummaryID: r.SummaryID}
		v, err := sums.Verify(ctx, tenantID, r.SummaryID)
		switch {
		case errors.Is(err, compact.ErrNotFound):
			c.Reason = "the summary is gone"
		case err != nil:
			return nil, err
		case !v.OK:
			c.Reason = v.Reason
		default:
			s, err := sums.Get(ctx, tenantID, r.SummaryID)
			if err != nil {
				return nil, err
			}
			if d := SummaryDigest(s); d != r.Digest {
				c.Reason = fmt.Sprintf("content digest mismatch: the summary reads %s, the run relied on %s (its content changed)", d, r.Digest)
			} else {
				c.OK = true
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// dialogView is what the decide step reads of the dialog: the structure of
// the older part (from verified summaries, or condensed from the raw
// messages where a summary failed) and of the recent messages, read raw.
type dialogView struct {
	Parts    []compact.Draft
	Recent   compact.Range // the recent messages, read raw (empty when ToSeq < FromSeq)
	Used     []string      // summary ids read
	Fallback string        // why some of the dialog was not read through its summary
	Tokens   int           // what the view costs the model, by the target's tokenizer
}

// readDialog builds the decide step's view. A summary that fails
// VerifyDialog is not used: its range is condensed again from the raw
// messages, in memory, by the same extractive rules (the stored summary is
// left stale for a rebuild). A dialog that is gone (its session expired)
// is a view with nothing in it: the decision does without.
func readDialog(ctx context.Context, sums *compact.Service, tenantID string, ref DialogRef) (dialogView, error) {
	v := dialogView{Used: []string{}}
	checks, err := VerifyDialog(ctx, sums, tenantID, ref)
	if err != nil {
		return v, err
	}
	owner := ref.Owner()
	raw := func(rg compact.Range) (bool, error) {
		items, err := sums.Items(ctx, tenantID, owner, rg.FromSeq, rg.ToSeq)
		if errors.Is(err, session.ErrNotFound) {
			v.Parts, v.Fallback = nil, fmt.Sprintf("the dialog %s is gone", ref.SessionID)
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("dialog %s: %w", ref.SessionID, err)
		}
		d, err := compact.Extractive{}.Compact(ctx, compact.Input{Owner: owner, Range: rg, Items: items})
		if err != nil {
			return false, err
		}
		v.Parts = append(v.Parts, d)
		for _, st := range compact.CountItems(DialogModel, items) {
			v.Tokens += st.Tokens
		}
		return true, nil
	}
	for i, r := range ref.Summaries {
		if checks[i].OK {
			s, err := sums.Get(ctx, tenantID, r.SummaryID)
			if err != nil {
				return v, err
			}
			v.Parts = append(v.Parts, compact.Draft{Facts: s.Facts, OpenQuestions: s.OpenQuestions, Decisions: s.Decisions, Carried: s.Carried, Text: s.Text})
			v.Used = append(v.Used, s.SummaryID)
			v.Tokens += s.Tokens
			continue
		}
		v.Fallback = fmt.Sprintf("summary %s not used: %s", r.SummaryID, checks[i].Reason)
		if ok, err := raw(r.Covers); !ok {
			return v, err
		}
	}
	if ref.RawTo >= ref.RawFrom {
		v.Recent = compact.Range{FromSeq: ref.RawFrom, ToSeq: ref.RawTo}
		if _, err := raw(v.Recent); err != nil {
			return v, err
		}
	}
	return v, nil
}

// dialogFacts are what the decision takes from the dialog.
type dialogFacts struct {
	Lost           bool   // the customer says the parcel never arrived
	DeclinesCredit bool   // the customer refuses store credit
	ClaimedAmount  string // "89.19 EUR", as the customer wrote it
	ClaimedSeqs    []int64
}

// facts reads the carried structure of the view: amounts and negations
// travel as structure in a summary, so a decision never depends on which
// sentences of prose a summary kept.
func (v dialogView) facts() dialogFacts {
	var f dialogFacts
	for _, d := range v.Parts {
		for _, a := range d.Carried.Amounts {
			f.ClaimedAmount, f.ClaimedSeqs = a.Value+" "+a.Currency, a.SourceSeqs
		}
		for _, n := range d.Carried.Negations {
			text := strings.ToLower(n.Text)
			f.Lost = f.Lost || strings.Contains(text, "never arrived")
			f.DeclinesCredit = f.DeclinesCredit || strings.Contains(text, "store credit")
		}
	}
	return f
}

// preferenceCandidate is a preference the customer stated in the dialog and
// confirmed when asked, found in the raw messages (never in a summary:
// nothing flows from a summary into long-term memory).
type preferenceCandidate struct {
	Key        string  `json:"key"`
	Value      string  `json:"value"`
	StatedSeq  int64   `json:"stated_seq"`
	ConfirmSeq int64   `json:"confirm_seq"`
	Seqs       []int64 `json:"seqs"`
}

// findPreference scans the dialog's messages for a stated preference that a
// later message confirms.
func findPreference(ctx context.Context, sums *compact.Service, tenantID string, owner compact.Owner) (*preferenceCandidate, error) {
	first, last, err := sums.Bounds(ctx, tenantID, owner)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil
	}
	if err != nil || last == 0 {
		return nil, err
	}
	items, err := sums.Items(ctx, tenantID, owner, first, last)
	if err != nil {
		return nil, err
	}
	var stated *preferenceCandidate
	for _, it := range items {
		if it.Type != "user" {
			continue
		}
		var p struct {
			Metadata struct {
				States *struct {
					Key   string `json:"key"`
					Value string `json:"value"`
				} `json:"states"`
				Confirms string `json:"confirms"`
			} `json:"metadata"`
		}
		if json.Unmarshal(it.Payload, &p) != nil {
			continue
		}
		if s := p.Metadata.States; s != nil && s.Key != "" && s.Value != "" {
			stated = &preferenceCandidate{Key: s.Key, Value: s.Value, StatedSeq: it.Seq}
		}
		if stated != nil && p.Metadata.Confirms == stated.Key {
			stated.ConfirmSeq = it.Seq
			stated.Seqs = []int64{stated.StatedSeq, it.Seq}
			return stated, nil
		}
	}
	return nil, nil
}

// decide is the offline model of the decide step: a lost parcel is refunded
// in full (the amount is the order's, from the payments service, whatever
// the customer wrote) to the method the customer confirmed in this dialog,
// else the one kept in memory, else the original one the policy names.
func decide(o Order, v dialogView, policy string, cand *preferenceCandidate, kept *Preference) Decision {
	f := v.facts()
	d := Decision{Refund: true, AmountCents: o.AmountCents, Reason: "customer request",
		RefundTo: MethodOriginal, RefundToSource: SourceDefault,
		Context: &DecisionContext{Summaries: v.Used, SummaryFallback: v.Fallback, ClaimedAmount: f.ClaimedAmount, ClaimedSeqs: f.ClaimedSeqs}}
	d.Context.RawFrom, d.Context.RawTo = v.Recent.FromSeq, v.Recent.ToSeq
	if f.Lost {
		d.Reason = "parcel reported lost"
	}
	if f.DeclinesCredit {
		d.Reason += "; the customer declines store credit"
	}
	switch {
	case cand != nil && cand.Key == PreferenceKey:
		d.RefundTo, d.RefundToSource = cand.Value, SourceDialog
	case kept != nil:
		d.RefundTo, d.RefundToSource, d.Context.MemoryID = kept.Value, SourceMemory, kept.MemoryID
	}
	d.Context.Tokens = v.Tokens + tokens.ForModel(DialogModel).Count(policy)
	return d
}
