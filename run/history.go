package run

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// SnapshotEvery is K of the compact history (doc.go): an event whose seq is
// 1 or a multiple of K stores the whole state, the others a delta against
// the event before. Reading a revision applies at most K-1 deltas.
const SnapshotEvery = 32

// IsSnapshotSeq tells whether the event at seq stores the whole state.
func IsSnapshotSeq(seq int64) bool { return seq == 1 || seq%SnapshotEvery == 0 }

// Delta is the change of the top-level members between two states: Set
// holds the members added or changed (with their new value), Del the names
// of the members removed (sorted).
type Delta struct {
	Set map[string]json.RawMessage `json:"s"`
	Del []string                   `json:"d"`
}

// MakeDelta returns the delta that turns state from into state to (both
// JSON objects). Members whose encodings differ count as changed, so the
// delta is exact even if it is not minimal.
func MakeDelta(from, to json.RawMessage) (json.RawMessage, error) {
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(from, &a); err != nil {
		return nil, fmt.Errorf("delta: previous state: %w", err)
	}
	if err := json.Unmarshal(to, &b); err != nil {
		return nil, fmt.Errorf("delta: new state: %w", err)
	}
	d := Delta{Set: map[string]json.RawMessage{}, Del: []string{}}
	for k, v := range b {
		if old, ok := a[k]; !ok || !bytes.Equal(old, v) {
			d.Set[k] = v
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			d.Del = append(d.Del, k)
		}
	}
	slices.Sort(d.Del)
	return json.Marshal(d)
}

// ApplyDeltas rebuilds a state from a snapshot and the deltas of the events
// after it, in order.
func ApplyDeltas(snapshot json.RawMessage, deltas []json.RawMessage) (json.RawMessage, error) {
	if len(deltas) == 0 {
		return snapshot, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(snapshot, &m); err != nil {
		return nil, fmt.Errorf("rebuild state: snapshot: %w", err)
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	for i, raw := range deltas {
		var d Delta
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("rebuild state: delta %d: %w", i+1, err)
		}
		for _, k := range d.Del {
			delete(m, k)
		}
		for k, v := range d.Set {
			m[k] = v
		}
	}
	return json.Marshal(m)
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
