package redis

import "sync"

// DefaultStateCacheBytes bounds the state cache unless configured.
const DefaultStateCacheBytes = 16 << 20

// cacheOverhead approximates the bytes an entry costs beyond its strings.
const cacheOverhead = 96

// stateCache remembers the last state this process saw of each session, so
// a patch can merge without reading the state first (one round trip instead
// of two). It never decides anything: a (generation, revision) pair names
// one immutable state and the compare-and-set checks both, so a stale entry
// costs a round trip, never a wrong write.
type stateCache struct {
	mu      sync.Mutex
	max     int // bytes; 0 disables the cache
	size    int
	entries map[string]cacheEntry
}

type cacheEntry struct {
	user, gen, app string
	rev            int64
	state          string
}

func (e cacheEntry) cost(key string) int {
	return cacheOverhead + len(key) + len(e.user) + len(e.gen) + len(e.app) + len(e.state)
}

func newStateCache(maxBytes int) *stateCache {
	return &stateCache{max: maxBytes, entries: map[string]cacheEntry{}}
}

func (c *stateCache) get(key string) (cacheEntry, bool) {
	if c.max == 0 {
		return cacheEntry{}, false
	}
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	return e, ok
}

// put records e unless it is older than what the cache holds for the same
// generation (replies of concurrent calls may arrive out of order).
func (c *stateCache) put(key string, e cacheEntry) {
	n := e.cost(key)
	if c.max == 0 || n > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		if old.gen == e.gen && old.rev > e.rev {
			return
		}
		c.size -= old.cost(key)
	}
	c.entries[key] = e
	c.size += n
	// Go's map iteration starts at a random entry: random eviction.
	for k, old := range c.entries {
		if c.size <= c.max {
			break
		}
		if k != key {
			delete(c.entries, k)
			c.size -= old.cost(k)
		}
	}
}

func (c *stateCache) drop(key string) {
	if c.max == 0 {
		return
	}
	c.mu.Lock()
	if old, ok := c.entries[key]; ok {
		delete(c.entries, key)
		c.size -= old.cost(key)
	}
	c.mu.Unlock()
}
