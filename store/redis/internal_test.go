package redis

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mementohq/memento/session"
)

func TestStateCacheStaysWithinItsBound(t *testing.T) {
	c := newStateCache(64 << 10)
	state := strings.Repeat("x", 1000)
	for i := range 1000 {
		c.put("k"+strconv.Itoa(i), cacheEntry{user: "u", gen: "g", rev: 1, state: state})
		if c.size > c.max {
			t.Fatalf("size %d over the bound %d after %d puts", c.size, c.max, i+1)
		}
	}
	if n := len(c.entries); n == 0 || n > 64 {
		t.Fatalf("%d entries of ~1 KiB in a 64 KiB cache", n)
	}
	total := 0
	for k, e := range c.entries {
		total += e.cost(k)
	}
	if total != c.size {
		t.Fatalf("accounted size %d, actual %d", c.size, total)
	}
	// A state larger than an eighth of the cache is not kept.
	c.put("big", cacheEntry{state: strings.Repeat("x", 9<<10)})
	if _, ok := c.get("big"); ok {
		t.Fatal("an oversized state was cached")
	}
}

func TestStateCacheKeepsTheNewestRevision(t *testing.T) {
	c := newStateCache(1 << 20)
	c.put("k", cacheEntry{gen: "g1", rev: 3, state: "three"})
	c.put("k", cacheEntry{gen: "g1", rev: 2, state: "two"}) // a late reply
	if e, _ := c.get("k"); e.rev != 3 {
		t.Fatalf("cached rev %d, want 3", e.rev)
	}
	c.put("k", cacheEntry{gen: "g2", rev: 1, state: "new"}) // created again
	if e, _ := c.get("k"); e.gen != "g2" || e.rev != 1 {
		t.Fatalf("cached %+v, want the new generation", e)
	}
	c.drop("k")
	if _, ok := c.get("k"); ok || c.size != 0 {
		t.Fatalf("after drop: size %d", c.size)
	}
	off := newStateCache(0)
	off.put("k", cacheEntry{state: "x"})
	if _, ok := off.get("k"); ok {
		t.Fatal("a disabled cache kept an entry")
	}
}

func TestEncodeMessageRoundTrips(t *testing.T) {
	for _, m := range []session.MessageInput{
		{Role: "user", Content: "plain"},
		{Role: "us\"er", Content: "quote \" backslash \\ nl \n tab \t cr \r nul \x00 bell \x07 del \x7f <&> é \u2028 😀", Metadata: json.RawMessage(`{"a":[1,"x"]}`)},
		{Role: "user", Content: "bad utf-8 \xff\xfe", Metadata: json.RawMessage(`null`)},
		{Role: "user", Content: "", Metadata: json.RawMessage(` {"a" : 1} `)},
	} {
		enc, err := encodeMessage(m)
		if err != nil {
			t.Fatalf("encode %q: %v", m.Content, err)
		}
		var w wireMessage
		if err := json.Unmarshal([]byte(enc), &w); err != nil {
			t.Fatalf("decode %s: %v", enc, err)
		}
		ref, _ := json.Marshal(wireMessage{Role: m.Role, Content: m.Content, Metadata: m.Metadata})
		var want wireMessage
		_ = json.Unmarshal(ref, &want)
		if w.Role != want.Role || w.Content != want.Content || !sameJSONText(w.Metadata, want.Metadata) {
			t.Fatalf("round trip of %q: got %+v, want %+v", m.Content, w, want)
		}
	}
}

func sameJSONText(a, b json.RawMessage) bool {
	var x, y any
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) || string(a)+string(b) == "null"
	}
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestScriptsTouchOneKey: every script reads and writes KEYS[1] only, so a
// script never spans cluster slots; the user index (another slot) is only
// ever updated by its own script or plain commands.
func TestScriptsTouchOneKey(t *testing.T) {
	for _, src := range scriptSources {
		if strings.Contains(src, "KEYS[2]") || strings.Contains(src, "#KEYS") {
			t.Fatalf("a script uses more than KEYS[1]:\n%s", src)
		}
	}
	if len(scriptSources) != len(allScripts) {
		t.Fatalf("%d script sources for %d scripts", len(scriptSources), len(allScripts))
	}
	s := &Store{prefix: "p:"}
	for _, k := range s.sessionKeys("t{1}", "s:2") {
		if !strings.HasPrefix(k, "p:{t:t%7B1%7D:s:s%3A2}") {
			t.Fatalf("session key %s: want the hash tag {t:<tenant>:s:<session>}", k)
		}
	}
}
