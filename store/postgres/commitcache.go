package postgres

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mementohq/memento/run"
)

// The commit cache keeps, per run this store last wrote, what the next
// commit needs to compute its delta and chain in Go: the revision, the
// chain head, status and schema version, and the state's top-level members
// as jsonb text. An entry is a hint, never trusted: the fast commit guards
// on the chain head (which covers every event, so the state too), the
// status and the version, and falls back to the SQL path when the guard
// refuses. Another instance committing to the run, a fork or a run
// recreated under the same id only cost a miss.
const (
	commitCacheEntries = 16384
	commitCacheBytes   = 64 << 20
	// States larger than this are not kept (their commits take the SQL path).
	commitCacheMaxState = 256 << 10
)

type commitEntry struct {
	rev     int64
	chain   string
	status  string
	version int
	members []jsonbMember // jsonb order
	// spent is the run's spend totals (nil: unknown, as in the row).
	spent map[string]int64
	size  int
}

type commitCache struct {
	mu    sync.Mutex
	m     map[string]*commitEntry
	bytes int
}

func newCommitCache() *commitCache { return &commitCache{m: map[string]*commitEntry{}} }

func commitKey(tenantID, runID string) string { return tenantID + "\x00" + runID }

// get returns the entry of the run if it is at revision rev.
func (c *commitCache) get(tenantID, runID string, rev int64) *commitEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[commitKey(tenantID, runID)]
	if e == nil || e.rev != rev {
		return nil
	}
	return e
}

func (c *commitCache) drop(tenantID, runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := commitKey(tenantID, runID)
	if e := c.m[k]; e != nil {
		c.bytes -= e.size
		delete(c.m, k)
	}
}

// put records the run at e.rev, evicting arbitrary entries over the bounds.
func (c *commitCache) put(tenantID, runID string, e *commitEntry) {
	k := commitKey(tenantID, runID)
	e.size = len(k) + 64
	for _, m := range e.members {
		e.size += len(m.key) + len(m.val) + 48
	}
	for k := range e.spent {
		e.size += len(k) + 48
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[k]; old != nil {
		c.bytes -= old.size
		delete(c.m, k)
	}
	// A finished run takes no more commits.
	if e.size > commitCacheMaxState || run.Status(e.status).Terminal() {
		return
	}
	for ek, old := range c.m {
		if len(c.m) < commitCacheEntries && c.bytes+e.size <= commitCacheBytes {
			break
		}
		c.bytes -= old.size
		delete(c.m, ek)
	}
	c.m[k] = e
	c.bytes += e.size
}

// jsonbDelta is run.MakeDelta over members in jsonb order, written as its
// jsonb text. A member counts as changed when its jsonb text differs, as in
// commitSQL; unlike commitSQL, a large member changed in place gets its
// own change (run.Delta.Put) rather than its whole new value.
func jsonbDelta(prev, next []jsonbMember) []byte {
	old := make(map[string][]byte, len(prev))
	for _, m := range prev {
		old[m.key] = m.val
	}
	d := run.Delta{Del: []string{}, Set: map[string]json.RawMessage{}}
	size := 16
	seen := make(map[string]bool, len(next))
	for _, m := range next {
		seen[m.key] = true
		v, ok := old[m.key]
		if ok && bytes.Equal(v, m.val) {
			continue
		}
		d.Put(m.key, v, m.val, ok)
		size += len(m.key) + len(m.val) + 6
	}
	for _, m := range prev {
		if !seen[m.key] {
			d.Del = append(d.Del, m.key)
		}
	}
	slices.Sort(d.Del)
	return appendJSONBDelta(make([]byte, 0, size), d)
}

// appendJSONBDelta writes d as jsonb_out would: its members ("d", "l", "n",
// "s": keys of one byte sort by byte) and every object's keys in jsonb
// order, the raw values as they are (jsonb text already).
func appendJSONBDelta(out []byte, d run.Delta) []byte {
	out = append(out, `{"d": [`...)
	for i, k := range d.Del {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = appendJSONBString(out, []byte(k))
	}
	out = append(out, ']')
	if d.Len != nil {
		out = append(out, `, "l": `...)
		out = strconv.AppendInt(out, int64(*d.Len), 10)
	}
	if len(d.Sub) > 0 {
		out = append(out, `, "n": `...)
		out = appendJSONBMembers(out, d.Sub, appendJSONBDelta)
	}
	out = append(out, `, "s": `...)
	out = appendJSONBMembers(out, d.Set, func(out []byte, v json.RawMessage) []byte { return append(out, v...) })
	return append(out, '}')
}

// appendJSONBMembers writes m as a jsonb object, its keys in jsonb order
// and each value by val.
func appendJSONBMembers[V any](out []byte, m map[string]V, val func([]byte, V) []byte) []byte {
	out = append(out, '{')
	for i, k := range jsonbKeys(m) {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = appendJSONBString(out, []byte(k))
		out = append(out, ": "...)
		out = val(out, m[k])
	}
	return append(out, '}')
}

// jsonbKeys returns m's keys in jsonb order: by byte length, then bytes.
func jsonbKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return keys
}
