package compact

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/tokens"
)

// DefaultModel is the model whose tokenizer counts a summary's Tokens unless configured.
const DefaultModel = "gpt-4o"

// Options configure a Service.
type Options struct {
	// Runs is where run events are read (nil: runs cannot be compacted).
	Runs run.Store
	// Sessions is where session messages are read (nil: sessions cannot).
	Sessions session.Store
	// Sources, when set for a kind, replaces the source built from Runs or Sessions.
	Sources map[OwnerKind]Source
	// Compactors are the compactors besides Extractive, which is always
	// there; a later one of the same name replaces an earlier one.
	Compactors []Compactor
	// Default names the compactor of a request that names none ("" means extractive).
	Default string
	// Model is the target model: its tokenizer counts Summary.Tokens (default DefaultModel).
	Model string
	// Budget is the token budget of a summary's text (0: DefaultBudget).
	Budget int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Service makes, verifies and rebuilds summaries. It reads the sources
// (run events, session messages) and writes only its own Store: nothing it
// does changes a run, an operation or a session (rule 1).
type Service struct {
	store      Store
	sources    map[OwnerKind]Source
	compactors map[string]Compactor
	def        string
	model      string
	counter    tokens.Counter
	budget     int
	now        func() time.Time
	// digested remembers the summaries whose range was read and matched,
	// by summary id, for Usable (see Incarnated).
	digested *lru.Cache[string, digested]
}

// digested is a summary whose range was read and matched its source
// digest, in an incarnation of its owner's log, at a time.
type digested struct {
	tenantID, incarnation, sourceDigest string
	at                                  time.Time
}

// verifiedTTL is how long Usable trusts a range it read and matched: an
// entry changed behind Memento's back (no API changes one) is seen by the
// context path within it, and at once by Verify.
const verifiedTTL = time.Minute

// digestedEntries bounds the summaries remembered as matched.
const digestedEntries = 16384

// NewService wires a Service to its store and sources.
func NewService(store Store, o Options) *Service {
	s := &Service{store: store, sources: map[OwnerKind]Source{}, compactors: map[string]Compactor{}, def: o.Default, model: o.Model, budget: o.Budget, now: o.Now}
	if o.Runs != nil {
		s.sources[OwnerRun] = RunSource{Store: o.Runs}
	}
	if o.Sessions != nil {
		s.sources[OwnerSession] = SessionSource{Store: o.Sessions}
	}
	for k, src := range o.Sources {
		s.sources[k] = src
	}
	s.compactors[ExtractiveName] = Extractive{}
	for _, c := range o.Compactors {
		s.compactors[c.Identity().Name] = c
	}
	if s.def == "" {
		s.def = ExtractiveName
	}
	if s.model == "" {
		s.model = DefaultModel
	}
	s.counter = tokens.ForModel(s.model)
	if s.budget <= 0 {
		s.budget = DefaultBudget
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.digested, _ = lru.New[string, digested](digestedEntries) // errors only for a size <= 0
	return s
}

// Store returns the summary store.
func (s *Service) Store() Store { return s.store }

// Compactors lists the names of the compactors, sorted.
func (s *Service) Compactors() []string {
	names := make([]string, 0, len(s.compactors))
	for n := range s.compactors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CompactRequest asks for a summary of an owner's log. FromSeq 0 means
// the seq after the last current summary (the log's first seq when there
// is none); ToSeq 0 means the log's last seq. Compactor "" means the
// service's default.
type CompactRequest struct {
	FromSeq   int64  `json:"from_seq,omitempty"`
	ToSeq     int64  `json:"to_seq,omitempty"`
	Compactor string `json:"compactor,omitempty"`
}

func (s *Service) compactor(name string) (Compactor, error) {
	if name == "" {
		name = s.def
	}
	c, ok := s.compactors[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownCompactor, name, strings.Join(s.Compactors(), ", "))
	}
	return c, nil
}

func (s *Service) source(o Owner) (Source, error) {
	if err := checkOwner(o); err != nil {
		return nil, err
	}
	src, ok := s.sources[o.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoSource, o.Kind)
	}
	return src, nil
}

func checkOwner(o Owner) error {
	switch o.Kind {
	case OwnerRun:
		if err := run.ValidID("run_id", o.ID); err != nil {
			return invalid("%v", err)
		}
	case OwnerSession:
		if o.ID == "" || o.UserID == "" {
			return invalid("a session owner needs a session id and a user id")
		}
	default:
		return invalid("owner kind must be %q or %q", OwnerRun, OwnerSession)
	}
	return nil
}

// Items reads the owner's entries with from <= seq <= to through the
// service's source (a context builder reads the raw tail after the last
// usable summary this way); entries that do not exist are simply absent.
func (s *Service) Items(ctx context.Context, tenantID string, owner Owner, from, to int64) ([]Item, error) {
	src, err := s.source(owner)
	if err != nil {
		return nil, err
	}
	return src.Items(ctx, tenantID, owner, from, to)
}

// Bounds returns the first and last seq of the owner's log (0, 0 when empty).
func (s *Service) Bounds(ctx context.Context, tenantID string, owner Owner) (first, last int64, err error) {
	src, err := s.source(owner)
	if err != nil {
		return 0, 0, err
	}
	return src.Bounds(ctx, tenantID, owner)
}

// Model is the target model whose tokenizer counts Summary.Tokens.
func (s *Service) Model() string { return s.model }

// live returns every summary of the owner that is not superseded, in range order.
func (s *Service) live(ctx context.Context, tenantID string, o Owner) ([]Summary, error) {
	var out []Summary
	q := ListQuery{Limit: MaxListLimit}
	for {
		page, err := s.store.List(ctx, tenantID, o, q)
		if err != nil {
			return nil, fmt.Errorf("list summaries of %s %s: %w", o.Kind, o.ID, err)
		}
		for _, x := range page {
			if x.Status != StatusSuperseded && x.Owner.UserID == o.UserID {
				out = append(out, x)
			}
		}
		if len(page) < q.Limit {
			return out, nil
		}
		last := page[len(page)-1]
		q.AfterFromSeq, q.AfterID = last.Covers.FromSeq, last.SummaryID
	}
}

// Compact summarises a range of the owner's log and stores the summary.
// The range must continue the chain: it starts right after the last
// current summary (or at the log's first seq) and ends within the log;
// otherwise ErrRange. Asking again for the range of a current summary
// (its from_seq, or the to_seq the chain ends at, as a retry does, even
// one racing the first request) returns it (created false) if it was made
// by the same compactor and still verifies, and rebuilds it otherwise; asking for the range of a
// stale one rebuilds it, even with later summaries after it. A compactor's failure is
// ErrCompactorFailed and stores nothing.
func (s *Service) Compact(ctx context.Context, tenantID string, owner Owner, req CompactRequest) (Summary, bool, error) {
	sum, created, err := s.compact(ctx, tenantID, owner, req)
	if errors.Is(err, errStoredMeanwhile) {
		// The same request (or one of the same range) stored its summary
		// while this one was made: asked again, its range is a current
		// summary's, which is returned.
		return s.compact(ctx, tenantID, owner, req)
	}
	return sum, created, err
}

// errStoredMeanwhile is the ErrRange of a summary another compaction of the
// range stored first.
var errStoredMeanwhile = fmt.Errorf("%w: another summary of the range was stored at the same time", ErrRange)

func (s *Service) compact(ctx context.Context, tenantID string, owner Owner, req CompactRequest) (Summary, bool, error) {
	src, err := s.source(owner)
	if err != nil {
		return Summary{}, false, err
	}
	comp, err := s.compactor(req.Compactor)
	if err != nil {
		return Summary{}, false, err
	}
	if req.FromSeq < 0 || req.ToSeq < 0 {
		return Summary{}, false, invalid("from_seq and to_seq must not be negative")
	}
	first, last, err := src.Bounds(ctx, tenantID, owner)
	if err != nil {
		return Summary{}, false, err
	}
	live, err := s.live(ctx, tenantID, owner)
	if err != nil {
		return Summary{}, false, err
	}
	var prev *Summary
	for i := range live {
		if live[i].Status == StatusCurrent && (prev == nil || live[i].Covers.ToSeq > prev.Covers.ToSeq) {
			prev = &live[i]
		}
	}
	from := req.FromSeq
	if from == 0 {
		from = first
		if prev != nil {
			from = prev.Covers.ToSeq + 1
			if req.ToSeq == prev.Covers.ToSeq {
				// The chain already ends where it asks: a retry of the
				// request that made the last summary, which it returns.
				from = prev.Covers.FromSeq
			}
		}
	}
	// The range of a summary that exists: return it, or rebuild it.
	for _, x := range live {
		if x.Status != StatusCurrent || x.Covers.FromSeq != from {
			continue
		}
		if req.ToSeq != 0 && req.ToSeq != x.Covers.ToSeq {
			return Summary{}, false, fmt.Errorf("%w: the current summary %s covers %s; a new range starts at %d", ErrRange, x.SummaryID, x.Covers, nextFrom(prev, first))
		}
		if x.Compactor == comp.Identity() {
			v, err := s.Verify(ctx, tenantID, x.SummaryID)
			if err != nil {
				return Summary{}, false, err
			}
			if v.OK {
				return x, false, nil
			}
		}
		out, err := s.rebuild(ctx, x, comp)
		return out, err == nil, err
	}
	// A stale summary with later summaries after it (Verify tells the
	// caller to ask for its range again) is rebuilt over its own range;
	// the last one in the chain may instead be replaced by a longer range,
	// below.
	for _, x := range live {
		if x.Status != StatusStale || x.Covers.FromSeq != from || from == nextFrom(prev, first) {
			continue
		}
		if req.ToSeq != 0 && req.ToSeq != x.Covers.ToSeq {
			return Summary{}, false, fmt.Errorf("%w: the stale summary %s covers %s and later summaries follow it: rebuild it over that range (to_seq %d or none)", ErrRange, x.SummaryID, x.Covers, x.Covers.ToSeq)
		}
		out, err := s.rebuild(ctx, x, comp)
		return out, err == nil, err
	}
	if from != nextFrom(prev, first) {
		return Summary{}, false, fmt.Errorf("%w: a new summary must start at seq %d (after the last current summary, or the log's first seq), not %d", ErrRange, nextFrom(prev, first), from)
	}
	to := req.ToSeq
	if to == 0 {
		to = last
	}
	if last == 0 || from > last {
		return Summary{}, false, fmt.Errorf("%w: nothing to compact: the log ends at seq %d and the next range starts at %d", ErrRange, last, from)
	}
	if to < from || to > last {
		return Summary{}, false, fmt.Errorf("%w: to_seq %d must be between %d and the log's last seq %d", ErrRange, to, from, last)
	}
	items, err := s.items(ctx, src, tenantID, owner, Range{from, to})
	if err != nil {
		return Summary{}, false, err
	}
	version, supersedes := 1, ""
	for _, x := range live {
		// A stale summary of this range is replaced, not left beside the new one.
		if x.Status == StatusStale && x.Covers.FromSeq == from {
			version, supersedes = max(version, x.Version+1), x.SummaryID
		}
	}
	out, err := s.build(ctx, tenantID, owner, Range{from, to}, items, comp, prev, version, supersedes)
	if err != nil {
		return Summary{}, false, err
	}
	return out, true, nil
}

func nextFrom(prev *Summary, first int64) int64 {
	if prev != nil {
		return prev.Covers.ToSeq + 1
	}
	return max(first, 1)
}

// items reads exactly the items of rg and refuses a hole.
func (s *Service) items(ctx context.Context, src Source, tenantID string, owner Owner, rg Range) ([]Item, error) {
	items, err := src.Items(ctx, tenantID, owner, rg.FromSeq, rg.ToSeq)
	if err != nil {
		return nil, err
	}
	if miss := missing(items, rg); miss != 0 {
		return nil, fmt.Errorf("%w: seq %d of %s is not in the log", ErrRange, miss, rg)
	}
	return items, nil
}

// missing returns the first seq of rg that items lack (0: none).
func missing(items []Item, rg Range) int64 {
	want := rg.FromSeq
	for _, it := range items {
		if it.Seq != want {
			return want
		}
		want++
	}
	if want <= rg.ToSeq {
		return want
	}
	return 0
}

// build runs the compactor and stores its validated draft.
func (s *Service) build(ctx context.Context, tenantID string, owner Owner, rg Range, items []Item, comp Compactor, prev *Summary, version int, supersedes string) (Summary, error) {
	digest, err := SourceDigest(items)
	if err != nil {
		return Summary{}, err
	}
	d, err := comp.Compact(ctx, Input{Owner: owner, Range: rg, Items: items, Previous: prev, Counter: s.counter, Budget: s.budget})
	if err != nil {
		return Summary{}, fmt.Errorf("%w: %s: %w", ErrCompactorFailed, comp.Identity().Name, err)
	}
	if err := d.validate(rg); err != nil {
		return Summary{}, fmt.Errorf("%w: %s: %w", ErrCompactorFailed, comp.Identity().Name, err)
	}
	sum := Summary{
		SummaryID:     uuid.Must(uuid.NewV7()).String(),
		TenantID:      tenantID,
		Owner:         owner,
		Version:       version,
		Covers:        rg,
		SourceDigest:  digest,
		Compactor:     comp.Identity(),
		Facts:         d.Facts,
		OpenQuestions: d.OpenQuestions,
		Decisions:     d.Decisions,
		Carried:       d.Carried,
		Text:          d.Text,
		Tokens:        s.counter.Count(d.Text),
		Tokenizer:     s.counter.Name(),
		TokensExact:   s.counter.Exact(),
		Usage:         d.Usage,
		Supersedes:    supersedes,
		Status:        StatusCurrent,
		CreatedAt:     s.now().UTC().Truncate(time.Microsecond),
	}
	if prev != nil {
		sum.Previous = prev.SummaryID
	}
	sum.normalize()
	if err := Seal(&sum); err != nil {
		return Summary{}, err
	}
	if err := s.store.Put(ctx, sum); err != nil {
		if errors.Is(err, ErrAlreadyExists) {
			return Summary{}, fmt.Errorf("range %s: %w", rg, errStoredMeanwhile)
		}
		return Summary{}, fmt.Errorf("store summary: %w", err)
	}
	return sum, nil
}

// Get returns one summary of the tenant. It does not check a session
// owner's user: a caller serving a user checks Owner.UserID (List, Chain
// and Usable do).
func (s *Service) Get(ctx context.Context, tenantID, summaryID string) (Summary, error) {
	if summaryID == "" || len(summaryID) > run.MaxIDLength {
		return Summary{}, fmt.Errorf("%w: %q", ErrNotFound, summaryID)
	}
	sum, err := s.store.Get(ctx, tenantID, summaryID)
	if err != nil {
		return Summary{}, err // the store names the summary
	}
	return sum, nil
}

type listCursor struct {
	From int64  `json:"f"`
	ID   string `json:"i"`
}

// List returns a page of the owner's summaries (every status) in range
// order, and the cursor of the next page ("" at the end).
func (s *Service) List(ctx context.Context, tenantID string, owner Owner, cursor string, limit int) ([]Summary, string, error) {
	if err := checkOwner(owner); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	if limit > MaxListLimit {
		return nil, "", invalid("limit must be at most %d", MaxListLimit)
	}
	q := ListQuery{Limit: limit + 1}
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		var c listCursor
		// An id no summary can have (NUL, invalid UTF-8) is no cursor we
		// gave, and a database would refuse it.
		if err != nil || len(b) > 1024 || json.Unmarshal(b, &c) != nil || run.ValidID("cursor", c.ID) != nil {
			return nil, "", invalid("cursor is not one this API returned")
		}
		q.AfterFromSeq, q.AfterID = c.From, c.ID
	}
	out, err := s.store.List(ctx, tenantID, owner, q)
	if err != nil {
		return nil, "", fmt.Errorf("list summaries of %s %s: %w", owner.Kind, owner.ID, err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		b, _ := json.Marshal(listCursor{From: out[limit-1].Covers.FromSeq, ID: out[limit-1].SummaryID})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	// A session is bound to its user: another user's summaries of a session
	// id are left out (a page may come out shorter; the cursor still holds).
	kept := out[:0]
	for _, x := range out {
		if x.Owner.UserID == owner.UserID {
			kept = append(kept, x)
		}
	}
	return kept, next, nil
}

// Verification is the answer of Verify.
type Verification struct {
	OK bool `json:"ok"`
	// Reason says why not, when OK is false.
	Reason    string  `json:"reason,omitempty"`
	SummaryID string  `json:"summary_id"`
	Status    Status  `json:"status"`
	Checked   Checked `json:"checked"`
}

// Checked is what Verify looked at.
type Checked struct {
	Covers Range `json:"covers"`
	// LogFirstSeq and LogLastSeq are the bounds of the log today.
	LogFirstSeq int64 `json:"log_first_seq"`
	LogLastSeq  int64 `json:"log_last_seq"`
	// Items is how many entries of the range exist today, of ItemsExpected.
	Items         int64 `json:"items"`
	ItemsExpected int64 `json:"items_expected"`
	// Previous and Next are the chain neighbours checked (ids).
	Previous string `json:"previous,omitempty"`
	Next     string `json:"next,omitempty"`
	// Overlaps are current summaries of the owner whose range overlaps.
	Overlaps []string `json:"overlaps"`
	// SourceDigest is the digest of today's items, to compare with the summary's.
	// DigestMatches and ContentDigestMatches are nil when Verify stopped
	// before that check (a failed check before it), so that "false" always
	// means checked and failed.
	SourceDigest  string `json:"source_digest,omitempty"`
	DigestMatches *bool  `json:"digest_matches,omitempty"`
	// ContentDigestMatches: the summary's content is what it was sealed with.
	ContentDigestMatches *bool `json:"content_digest_matches,omitempty"`
}

// Passed tells whether a check ran and passed (DigestMatches,
// ContentDigestMatches).
func Passed(check *bool) bool { return check != nil && *check }

// Verify checks a summary against today's log and its chain: the range
// is sane and continues its previous summary with no gap or overlap, no
// current summary of the owner overlaps it, the next one starts right
// after it, every entry of the range exists, and the digest of those
// entries is the summary's. A current summary that fails is marked stale
// with the reason (and is never used again; rebuild it). A stale or
// superseded summary is never OK, even if the checks pass.
func (s *Service) Verify(ctx context.Context, tenantID, summaryID string) (Verification, error) {
	sum, err := s.Get(ctx, tenantID, summaryID)
	if err != nil {
		return Verification{}, err
	}
	return s.verify(ctx, sum, nil)
}

// verify is Verify of a summary already read. read, when not nil, is what
// Usable read of the owner for its whole chain: the check then reads
// neither again, and takes a recent match of the range for today's (see
// Incarnated) rather than read the range again.
func (s *Service) verify(ctx context.Context, sum Summary, read *ownerRead) (Verification, error) {
	tenantID := sum.TenantID
	v := Verification{SummaryID: sum.SummaryID, Status: sum.Status, Checked: Checked{Covers: sum.Covers, Overlaps: []string{}, ItemsExpected: max(sum.Covers.Len(), 0)}}
	reason, err := s.check(ctx, sum, &v.Checked, read)
	if err != nil {
		return Verification{}, err
	}
	switch {
	case reason != "":
		v.Reason = reason
		if sum.Status == StatusCurrent {
			st, err := s.store.MarkStale(ctx, tenantID, sum.SummaryID, reason, s.now().UTC())
			if err != nil {
				return Verification{}, fmt.Errorf("mark summary %s stale: %w", sum.SummaryID, err)
			}
			v.Status = st.Status
		}
	case sum.Status == StatusStale:
		v.Reason = "marked stale earlier: " + sum.StaleReason
	case sum.Status == StatusSuperseded:
		v.Reason = "superseded by a rebuild of the same range"
	default:
		v.OK = true
	}
	return v, nil
}

// previous returns the summary sum continues, from live when it is there
// (a superseded one is not: it is read from the store).
func (s *Service) previous(ctx context.Context, sum Summary, live []Summary) (Summary, error) {
	for _, x := range live {
		if x.SummaryID == sum.Previous {
			return x, nil
		}
	}
	return s.store.Get(ctx, sum.TenantID, sum.Previous)
}

// check returns why sum fails ("" when it passes); an error is a failure
// to check (a store that does not answer), not a failed check.
func (s *Service) check(ctx context.Context, sum Summary, c *Checked, read *ownerRead) (string, error) {
	rg := sum.Covers
	if rg.FromSeq < 1 || rg.ToSeq < rg.FromSeq {
		return fmt.Sprintf("the range %s is not a range of seqs", rg), nil
	}
	src, err := s.source(sum.Owner)
	if err != nil {
		return "", err
	}
	gone := func(err error) bool { return errors.Is(err, run.ErrNotFound) || errors.Is(err, session.ErrNotFound) }
	// What Usable read for its whole chain is trusted for a recent match.
	trusted := read != nil
	if read == nil {
		r := ownerRead{}
		r.first, r.last, r.inc, err = logOf(ctx, src, sum.TenantID, sum.Owner)
		if gone(err) {
			return fmt.Sprintf("the %s %s is gone", sum.Owner.Kind, sum.Owner.ID), nil
		} else if err != nil {
			return "", err
		}
		if r.live, err = s.live(ctx, sum.TenantID, sum.Owner); err != nil {
			return "", err
		}
		read = &r
	}
	first, last, live := read.first, read.last, read.live
	c.LogFirstSeq, c.LogLastSeq = first, last
	// Chain: the previous summary ends right before; without one, no entry
	// of the log lies before the range (it would be covered by nothing).
	if sum.Previous != "" {
		c.Previous = sum.Previous
		p, err := s.previous(ctx, sum, live)
		if errors.Is(err, ErrNotFound) {
			return fmt.Sprintf("the previous summary %s is gone", sum.Previous), nil
		} else if err != nil {
			return "", fmt.Errorf("get summary %s: %w", sum.Previous, err)
		}
		if p.Owner.Kind != sum.Owner.Kind || p.Owner.ID != sum.Owner.ID {
			return fmt.Sprintf("the previous summary %s belongs to another owner", p.SummaryID), nil
		}
		switch end := p.Covers.ToSeq; {
		case end+1 < rg.FromSeq:
			return fmt.Sprintf("gap: the previous summary %s ends at seq %d and this one starts at %d", p.SummaryID, end, rg.FromSeq), nil
		case end+1 > rg.FromSeq:
			return fmt.Sprintf("overlap: the previous summary %s ends at seq %d and this one starts at %d", p.SummaryID, end, rg.FromSeq), nil
		}
	} else if first != 0 && first < rg.FromSeq {
		return fmt.Sprintf("gap: the chain starts at seq %d but the log holds seq %d before it", rg.FromSeq, first), nil
	}
	var next *Summary
	for i, o := range live {
		if o.SummaryID == sum.SummaryID || o.Status != StatusCurrent {
			continue
		}
		if o.Covers.Overlaps(rg) {
			c.Overlaps = append(c.Overlaps, o.SummaryID)
		}
		if o.Covers.FromSeq > rg.ToSeq && (next == nil || o.Covers.FromSeq < next.Covers.FromSeq) {
			next = &live[i]
		}
	}
	if len(c.Overlaps) > 0 {
		return fmt.Sprintf("overlap: current summary %s also covers part of %s", c.Overlaps[0], rg), nil
	}
	if next != nil {
		c.Next = next.SummaryID
		if next.Covers.FromSeq != rg.ToSeq+1 {
			return fmt.Sprintf("gap: this summary ends at seq %d and the next one %s starts at %d", rg.ToSeq, next.SummaryID, next.Covers.FromSeq), nil
		}
	}
	if rg.ToSeq > last {
		return fmt.Sprintf("the range %s runs past the log's last seq %d", rg, last), nil
	}
	if trusted && s.matchedRecently(sum, read) {
		c.Items, c.SourceDigest, c.DigestMatches = rg.Len(), sum.SourceDigest, new(true)
	} else {
		items, err := src.Items(ctx, sum.TenantID, sum.Owner, rg.FromSeq, rg.ToSeq)
		if gone(err) {
			return fmt.Sprintf("the %s %s is gone", sum.Owner.Kind, sum.Owner.ID), nil
		} else if err != nil {
			return "", err
		}
		c.Items = int64(len(items))
		if miss := missing(items, rg); miss != 0 {
			return fmt.Sprintf("seq %d of %s is not in the log any more", miss, rg), nil
		}
		d, err := SourceDigest(items)
		if err != nil {
			return "", err
		}
		c.SourceDigest = d
		c.DigestMatches = new(d == sum.SourceDigest)
		if !*c.DigestMatches {
			s.digested.Remove(sum.SummaryID)
			return "source digest mismatch: the entries of the range changed since the summary was made", nil
		}
		if read.inc != "" {
			s.digested.Add(sum.SummaryID, digested{tenantID: sum.TenantID, incarnation: read.inc, sourceDigest: d, at: s.now()})
		}
	}
	cd, err := ContentDigest(sum)
	if err != nil {
		return "", err
	}
	c.ContentDigestMatches = new(cd == sum.ContentDigest)
	if !*c.ContentDigestMatches {
		return "content digest mismatch: the summary was changed after it was made", nil
	}
	return "", nil
}

// Rebuild makes a new version of a summary from today's raw entries of
// its range with the named compactor ("" the default), superseding it;
// the new one keeps its chain link. A superseded summary is ErrRange
// (rebuild the current one); entries missing from the log are ErrRange.
func (s *Service) Rebuild(ctx context.Context, tenantID, summaryID, compactor string) (Summary, error) {
	comp, err := s.compactor(compactor)
	if err != nil {
		return Summary{}, err
	}
	old, err := s.Get(ctx, tenantID, summaryID)
	if err != nil {
		return Summary{}, err
	}
	return s.rebuild(ctx, old, comp)
}

func (s *Service) rebuild(ctx context.Context, old Summary, comp Compactor) (Summary, error) {
	if old.Status == StatusSuperseded {
		return Summary{}, fmt.Errorf("%w: summary %s was superseded by a rebuild; rebuild the current one", ErrRange, old.SummaryID)
	}
	src, err := s.source(old.Owner)
	if err != nil {
		return Summary{}, err
	}
	items, err := s.items(ctx, src, old.TenantID, old.Owner, old.Covers)
	if err != nil {
		return Summary{}, err
	}
	var prev *Summary
	if old.Previous != "" {
		p, err := s.store.Get(ctx, old.TenantID, old.Previous)
		if err == nil {
			prev = &p
		} else if !errors.Is(err, ErrNotFound) {
			return Summary{}, fmt.Errorf("get summary %s: %w", old.Previous, err)
		}
	}
	return s.build(ctx, old.TenantID, old.Owner, old.Covers, items, comp, prev, old.Version+1, old.SummaryID)
}

// RebuildOwner rebuilds, in range order, every summary of the owner that
// is stale or was made by another identity than the named compactor's
// (after a compactor change), and returns the new ones.
func (s *Service) RebuildOwner(ctx context.Context, tenantID string, owner Owner, compactor string) ([]Summary, error) {
	comp, err := s.compactor(compactor)
	if err != nil {
		return nil, err
	}
	if _, err := s.source(owner); err != nil {
		return nil, err
	}
	live, err := s.live(ctx, tenantID, owner)
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, x := range live {
		if x.Status == StatusCurrent && x.Compactor == comp.Identity() {
			continue
		}
		n, err := s.rebuild(ctx, x, comp)
		if err != nil {
			return out, fmt.Errorf("rebuild summary %s: %w", x.SummaryID, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Chain returns the current summaries that form the owner's chain from the
// start of its log, in range order, stopping before the first gap: the
// older part of the history a context may show as summaries instead of raw
// entries. When a session's cap trimmed the oldest entries, the summaries
// over them are passed over and the chain starts with the one after them
// (the entries between the log's start and it stay raw). It checks
// contiguity only; Usable also verifies each one.
func (s *Service) Chain(ctx context.Context, tenantID string, owner Owner) ([]Summary, error) {
	out, _, err := s.chain(ctx, tenantID, owner)
	return out, err
}

// ownerRead is what a check of a whole chain reads of the owner once,
// not once per summary: its live summaries and its log's bounds and
// incarnation.
type ownerRead struct {
	live        []Summary
	first, last int64
	inc         string
}

// chain is Chain, with what it read of the owner.
func (s *Service) chain(ctx context.Context, tenantID string, owner Owner) ([]Summary, *ownerRead, error) {
	src, err := s.source(owner)
	if err != nil {
		return nil, nil, err
	}
	first, last, inc, err := logOf(ctx, src, tenantID, owner)
	if err != nil {
		return nil, nil, err
	}
	live, err := s.live(ctx, tenantID, owner)
	if err != nil {
		return nil, nil, err
	}
	var out []Summary
	want := max(first, 1)
	for _, x := range live {
		if x.Status != StatusCurrent {
			continue
		}
		if len(out) == 0 && x.Covers.FromSeq < max(first, 1) {
			// It covers entries the log no longer holds (a session's cap
			// trimmed them): it cannot be verified, and the chain starts
			// with the summary that follows it.
			want = max(want, x.Covers.ToSeq+1)
			continue
		}
		if x.Covers.FromSeq != want {
			break
		}
		out = append(out, x)
		want = x.Covers.ToSeq + 1
	}
	return out, &ownerRead{live: live, first: first, last: last, inc: inc}, nil
}

// Usable is Chain with every summary verified (as Verify does, except
// that a range read and matched in the last verifiedTTL, in the same
// incarnation of the log, is not read again: see Incarnated), cut before
// the first that fails, which is marked stale. What it returns may be shown to a model in place of the raw
// entries of their ranges; the entries after the last one are raw.
func (s *Service) Usable(ctx context.Context, tenantID string, owner Owner) ([]Summary, error) {
	chain, read, err := s.chain(ctx, tenantID, owner)
	if err != nil {
		return nil, err
	}
	for i, x := range chain {
		v, err := s.verify(ctx, x, read)
		if err != nil {
			return nil, err
		}
		if !v.OK {
			return chain[:i], nil
		}
	}
	return chain, nil
}

// matchedRecently tells whether sum's range was read and matched in the
// last verifiedTTL, in the incarnation of the log read, and is still in it.
func (s *Service) matchedRecently(sum Summary, read *ownerRead) bool {
	d, ok := s.digested.Get(sum.SummaryID)
	return ok && read.inc != "" && sum.Covers.FromSeq >= read.first && d.tenantID == sum.TenantID &&
		d.incarnation == read.inc && d.sourceDigest == sum.SourceDigest && s.now().Sub(d.at) < verifiedTTL
}

// logOf is the source's bounds and, when it names them, the incarnation
// of the owner's log ("" when it does not).
func logOf(ctx context.Context, src Source, tenantID string, owner Owner) (first, last int64, inc string, err error) {
	if ls, ok := src.(Incarnated); ok {
		return ls.Log(ctx, tenantID, owner)
	}
	first, last, err = src.Bounds(ctx, tenantID, owner)
	return first, last, "", err
}

// Forget deletes every summary of the owner (retention, a closed session).
func (s *Service) Forget(ctx context.Context, tenantID string, owner Owner) (int, error) {
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	n, err := s.store.DeleteOwner(ctx, tenantID, owner)
	if err != nil {
		return 0, fmt.Errorf("delete summaries of %s %s: %w", owner.Kind, owner.ID, err)
	}
	return n, nil
}
