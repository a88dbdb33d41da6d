package postgres

import (
	"bytes"
	"slices"
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
// jsonb text: {"d": [removed names, sorted], "s": {changed members}}. A
// member counts as changed when its jsonb text differs, as in commitSQL.
func jsonbDelta(prev, next []jsonbMember) []byte {
	old := make(map[string][]byte, len(prev))
	for _, m := range prev {
		old[m.key] = m.val
	}
	size := 16
	for _, m := range next {
		size += len(m.key) + len(m.val) + 6
	}
	out := make([]byte, 0, size)
	out = append(out, `{"d": [`...)
	seen := make(map[string]bool, len(next))
	for _, m := range next {
		seen[m.key] = true
	}
	var del []string
	for _, m := range prev {
		if !seen[m.key] {
			del = append(del, m.key)
		}
	}
	slices.Sort(del)
	for i, k := range del {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = appendJSONBString(out, []byte(k))
	}
	out = append(out, `], "s": {`...)
	n := 0
	for _, m := range next {
		if v, ok := old[m.key]; ok && bytes.Equal(v, m.val) {
			continue
		}
		if n > 0 {
			out = append(out, ", "...)
		}
		n++
		out = appendJSONBString(out, []byte(m.key))
		out = append(out, ": "...)
		out = append(out, m.val...)
	}
	return append(out, "}}"...)
}
