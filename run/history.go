package run

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// SnapshotEvery is K of the compact history (doc.go): an event whose seq is
// 1 or a multiple of K stores the whole state, the others a delta against
// the event before. Reading a revision applies at most K-1 deltas.
const SnapshotEvery = 32

// IsSnapshotSeq tells whether the event at seq stores the whole state.
func IsSnapshotSeq(seq int64) bool { return seq == 1 || seq%SnapshotEvery == 0 }

// Delta is the change between two JSON objects. Set holds the members added
// or replaced (with their new value), Del the names of the members removed
// (sorted), Sub the members changed in place: a large object or array in
// both states whose own change is much smaller than its new value. In a
// Delta of an array (Len set, its new length) the keys of Set and Sub are
// element indices, Set holding the elements replaced or appended.
type Delta struct {
	Del []string                   `json:"d"`
	Len *int                       `json:"l,omitempty"`
	Sub map[string]Delta           `json:"n,omitempty"`
	Set map[string]json.RawMessage `json:"s"`
}

// A member changes in place only when both its values are at least
// nestMinBytes long and nestDepth levels are not yet used: below that a
// replacement costs about as much and is cheaper to compute and apply.
const (
	nestMinBytes = 512
	nestDepth    = 8
)

// MakeDelta returns the delta that turns state from into state to (both
// JSON objects). Values whose encodings differ count as changed, so the
// delta is exact even if it is not minimal.
func MakeDelta(from, to json.RawMessage) (json.RawMessage, error) {
	a, err := objectMembers(from)
	if err != nil {
		return nil, fmt.Errorf("delta: previous state: %w", err)
	}
	b, err := objectMembers(to)
	if err != nil {
		return nil, fmt.Errorf("delta: new state: %w", err)
	}
	d, _ := diffObject(a, b, 0)
	return json.Marshal(d)
}

// Put records in d, a delta of top-level members, that member k is now v,
// and was old if hadOld: as a change in place when that is much smaller
// than v (large objects or arrays in both), else as v. Raw values in the
// delta are slices of v's text.
func (d *Delta) Put(k string, old, v json.RawMessage, hadOld bool) { d.put(k, old, v, hadOld, 0) }

// put is Put at a depth; it returns about how many bytes the entry encodes to.
func (d *Delta) put(k string, old, v json.RawMessage, hadOld bool, depth int) int {
	if hadOld {
		if sub, size, ok := diffValue(old, v, depth+1); ok {
			if d.Sub == nil {
				d.Sub = map[string]Delta{}
			}
			d.Sub[k] = sub
			return len(k) + 4 + size
		}
	}
	d.Set[k] = v
	return len(k) + 4 + len(v)
}

// diffValue is the change in place from value a to value b at depth, with
// about how many bytes it encodes to, or ok false when b should replace a
// whole: they are not both objects or both arrays, too small or too deep,
// or the change is not much smaller than b.
func diffValue(a, b json.RawMessage, depth int) (Delta, int, bool) {
	if depth > nestDepth || len(a) < nestMinBytes || len(b) < nestMinBytes {
		return Delta{}, 0, false
	}
	var (
		d    Delta
		size int
	)
	switch ka, kb := firstByte(a), firstByte(b); {
	case ka == '{' && kb == '{':
		ma, err1 := objectMembers(a)
		mb, err2 := objectMembers(b)
		if err1 != nil || err2 != nil {
			return Delta{}, 0, false
		}
		d, size = diffObject(ma, mb, depth)
	case ka == '[' && kb == '[':
		sa, ok1 := arraySpans(a)
		sb, ok2 := arraySpans(b)
		if !ok1 || !ok2 {
			return Delta{}, 0, false
		}
		d, size = diffArray(a, b, sa, sb, depth)
	default:
		return Delta{}, 0, false
	}
	if size*2 > len(b) {
		return Delta{}, 0, false
	}
	return d, size, true
}

func firstByte(b json.RawMessage) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// diffObject returns the delta from a to b and about how many bytes it
// encodes to.
func diffObject(a, b map[string]json.RawMessage, depth int) (Delta, int) {
	d := Delta{Set: map[string]json.RawMessage{}, Del: []string{}}
	size := 16
	for k, v := range b {
		old, ok := a[k]
		if ok && bytes.Equal(old, v) {
			continue
		}
		size += d.put(k, old, v, ok, depth)
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			d.Del = append(d.Del, k)
			size += len(k) + 3
		}
	}
	slices.Sort(d.Del)
	return d, size
}

// diffArray is diffObject for arrays a and b, split at sa and sb: elements
// replaced or appended go in Set by index, elements changed in place in
// Sub, and Len says where b ends.
func diffArray(a, b json.RawMessage, sa, sb []span, depth int) (Delta, int) {
	n := len(sb)
	d := Delta{Set: map[string]json.RawMessage{}, Del: []string{}, Len: &n}
	size := 24
	for i, e := range sb {
		v := b[e.from:e.to]
		switch {
		case i >= len(sa):
			size += d.put(strconv.Itoa(i), nil, v, false, depth)
		case !bytes.Equal(a[sa[i].from:sa[i].to], v):
			size += d.put(strconv.Itoa(i), a[sa[i].from:sa[i].to], v, true, depth)
		}
	}
	return d, size
}

// ApplyDeltas rebuilds a state from a snapshot and the deltas of the events
// after it, in order. Values a delta does not reach are written back as
// they were read; the result is the state, not necessarily its spelling.
func ApplyDeltas(snapshot json.RawMessage, deltas []json.RawMessage) (json.RawMessage, error) {
	if len(deltas) == 0 {
		return snapshot, nil
	}
	root := &jsonNode{raw: snapshot}
	for i, raw := range deltas {
		var d Delta
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("rebuild state: delta %d: %w", i+1, err)
		}
		if err := root.apply(d, 0); err != nil {
			return nil, fmt.Errorf("rebuild state: delta %d: %w", i+1, err)
		}
	}
	return root.encode(nil)
}

// span is where one element lies in its array's text. Spans hold no
// pointers: an array of a state may have hundreds of thousands of
// elements, and slices of them would cost the collector more than the split.
type span struct{ from, to int32 }

// arraySpans splits a JSON array into its elements, or ok false if b is
// not one. One pass, decoding no element.
func arraySpans(b json.RawMessage) ([]span, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, false
	}
	if len(b) > math.MaxInt32 {
		return nil, false
	}
	var out []span
	for dec.PeekKind() != ']' {
		start := int(dec.InputOffset())
		if err := dec.SkipValue(); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		start = end - len(trimValue(b[start:end]))
		if len(out) == cap(out) {
			out = slices.Grow(out, max(len(out), 64)) // doubling: a long array is copied less
		}
		out = append(out, span{int32(start), int32(end)})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	return out, true
}

// objectMembers splits a JSON object into its members' names and texts
// (slices of b); of duplicate names the last counts, as in encoding/json
// and jsonb.
func objectMembers(b json.RawMessage) (map[string]json.RawMessage, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	out := map[string]json.RawMessage{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // the token is void after the next call
		start := dec.InputOffset()
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
		out[name] = trimValue(b[start:dec.InputOffset()])
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	return out, nil
}

// trimValue drops what precedes a value in the text after the token before
// it: whitespace and the separator.
func trimValue(b []byte) json.RawMessage {
	i := 0
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
			continue
		}
		break
	}
	return b[i:]
}

// jsonNode is a value being rebuilt: raw text until a delta reaches into
// it, then its members (obj) or elements (arr), each a node again.
type jsonNode struct {
	raw  json.RawMessage
	kind byte // 0 (raw), '{' or '['
	obj  map[string]*jsonNode
	// An array is its text split (spans), of which the first base elements
	// still stand, plus the elements a delta replaced or changed (over),
	// up to length n. Only what a delta reaches is a node of its own.
	spans []span
	base  int
	over  map[int]*jsonNode
	n     int
}

func (n *jsonNode) apply(d Delta, depth int) error {
	if depth > nestDepth {
		return fmt.Errorf("change nested deeper than %d", nestDepth)
	}
	if d.Len != nil {
		return n.applyArray(d, depth)
	}
	if n.kind != '{' {
		m, err := objectMembers(n.raw)
		if err != nil {
			return fmt.Errorf("change of an object applied to %.40s", n.raw)
		}
		n.kind, n.raw, n.obj = '{', nil, make(map[string]*jsonNode, len(m))
		for k, v := range m {
			n.obj[k] = &jsonNode{raw: v}
		}
	}
	for _, k := range d.Del {
		delete(n.obj, k)
	}
	for k, v := range d.Set {
		n.obj[k] = &jsonNode{raw: v}
	}
	for k, s := range d.Sub {
		c := n.obj[k]
		if c == nil {
			return fmt.Errorf("change of member %q, which is absent", k)
		}
		if err := c.apply(s, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (n *jsonNode) applyArray(d Delta, depth int) error {
	if n.kind != '[' {
		spans, ok := arraySpans(n.raw)
		if !ok {
			return fmt.Errorf("change of an array applied to %.40s", n.raw)
		}
		n.kind, n.spans, n.base, n.n, n.over = '[', spans, len(spans), len(spans), map[int]*jsonNode{}
	}
	l := *d.Len
	if l < 0 || l > n.n+len(d.Set) {
		return fmt.Errorf("array change to length %d from %d with %d elements set", l, n.n, len(d.Set))
	}
	if l < n.n {
		for i := range n.over {
			if i >= l {
				delete(n.over, i)
			}
		}
		n.base = min(n.base, l)
	}
	n.n = l
	index := func(k string) (int, error) {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= l {
			return 0, fmt.Errorf("array change at index %q of %d", k, l)
		}
		return i, nil
	}
	for k, v := range d.Set {
		i, err := index(k)
		if err != nil {
			return err
		}
		n.over[i] = &jsonNode{raw: v}
	}
	for k, s := range d.Sub {
		i, err := index(k)
		if err != nil {
			return err
		}
		c := n.over[i]
		switch {
		case c != nil:
		case i < n.base:
			c = &jsonNode{raw: n.raw[n.spans[i].from:n.spans[i].to]}
			n.over[i] = c
		default:
			return fmt.Errorf("array change inside element %d, which is absent", i)
		}
		if err := c.apply(s, depth+1); err != nil {
			return err
		}
	}
	for i := n.base; i < l; i++ {
		if n.over[i] == nil {
			return fmt.Errorf("array change leaves element %d unset", i)
		}
	}
	return nil
}

// encode appends the node's JSON text to dst (object members sorted).
func (n *jsonNode) encode(dst []byte) ([]byte, error) {
	switch n.kind {
	case '{':
		keys := slices.Sorted(maps.Keys(n.obj))
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			kb, err := json.Marshal(k)
			if err != nil {
				return nil, err
			}
			dst = append(append(dst, kb...), ':')
			if dst, err = n.obj[k].encode(dst); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case '[':
		dst = append(dst, '[')
		for i := 0; i < n.n; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			c := n.over[i]
			if c == nil {
				dst = append(dst, n.raw[n.spans[i].from:n.spans[i].to]...)
				continue
			}
			var err error
			if dst, err = c.encode(dst); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	default:
		return append(dst, bytes.TrimSpace(n.raw)...), nil
	}
}

// ChainNext is the hash chain value after ev given the value before it (""
// before seq 1): hex(sha256(prev || input)), where input is every field of
// the event as the store returns it, each written as "<byte length>:<bytes>,"
// so that no two events share an input. PostgreSQL computes the same in SQL
// (store/postgres), over the same text it returns.
func ChainNext(prev string, ev Event) string {
	kind := "D"
	if ev.Snapshot {
		kind = "S"
	}
	h := sha256.New()
	h.Write([]byte(prev))
	for _, f := range []string{
		strconv.FormatInt(ev.Seq, 10), ev.EventType, ev.StepID, strconv.Itoa(ev.Attempt),
		string(ev.Payload), kind, string(ev.Change), ev.NextStep, string(ev.Status),
		strconv.Itoa(ev.StateSchemaVersion),
	} {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
		h.Write([]byte{','})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// integerLit is the JSON number form SpendOf counts.
var integerLit = regexp.MustCompile(`^-?[0-9]{1,18}$`)

// SpendOf returns the members of the payload's "spend" object whose values
// are integers (at most 18 digits), or nil if it has none. Budgets are
// enforced on their running totals (Run.Spent).
func SpendOf(payload json.RawMessage) map[string]int64 {
	if !bytes.Contains(payload, []byte(`"spend"`)) {
		return nil
	}
	var p struct {
		Spend map[string]json.RawMessage `json:"spend"`
	}
	if json.Unmarshal(payload, &p) != nil || len(p.Spend) == 0 {
		return nil
	}
	out := map[string]int64{}
	for k, v := range p.Spend {
		if !integerLit.Match(v) {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// AddSpendChecked is AddSpend that refuses, with an error wrapping
// ErrInvalidInput, a spend that would take a total out of int64: a store
// refuses such a commit, changing nothing, rather than wrap the total (and
// so undo a budget) or keep one it cannot read back.
func AddSpendChecked(total, s map[string]int64) (map[string]int64, error) {
	for k, v := range s {
		t := total[k]
		if (v > 0 && t > math.MaxInt64-v) || (v < 0 && t < math.MinInt64-v) {
			return nil, fmt.Errorf("%w: spend %q: the run's total %d plus %d leaves the 64-bit range", ErrInvalidInput, k, t, v)
		}
	}
	return AddSpend(total, s), nil
}

// AddSpend returns total plus s (total nil stays nil: unknown stays unknown).
func AddSpend(total, s map[string]int64) map[string]int64 {
	if total == nil {
		return nil
	}
	out := make(map[string]int64, len(total)+len(s))
	for k, v := range total {
		out[k] = v
	}
	for k, v := range s {
		out[k] += v
	}
	return out
}

// CheckChain verifies events that follow, without a gap, the event at seq
// after whose chain value is prev: each must carry ChainNext of the one
// before. It returns the chain value after the last event and the seq of
// the last one, or an error naming the first event that breaks the chain.
// Events written before the chain was kept carry none ("") and are only
// checked for continuity, as long as no chained event came before them.
func CheckChain(prev string, after int64, evs []Event) (string, int64, error) {
	for _, ev := range evs {
		if ev.Seq != after+1 {
			return prev, after, fmt.Errorf("gap in the event log: seq %d follows %d", ev.Seq, after)
		}
		switch {
		case ev.Chain == "" && prev == "":
			// Legacy row, before the chain.
		case ev.Chain != ChainNext(prev, ev):
			return prev, after, fmt.Errorf("event %d does not match the hash chain: altered or out of place", ev.Seq)
		}
		prev, after = ev.Chain, ev.Seq
	}
	return prev, after, nil
}
