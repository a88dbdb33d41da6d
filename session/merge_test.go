package session

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkMergeState compares the text-level merge with decoding, merging and
// encoding (the reference) on a state as the service stores it.
func checkMergeState(t *testing.T, docS, patchS string) {
	t.Helper()
	doc, err1 := decodeJSON([]byte(docS))
	patch, err2 := decodeJSON([]byte(patchS))
	if err1 != nil || err2 != nil {
		return
	}
	if _, ok := doc.(map[string]any); !ok {
		return
	}
	p, ok := patch.(map[string]any)
	if !ok {
		return
	}
	stored, err := encodeJSON(doc)
	if err != nil {
		return
	}
	refDoc, _ := decodeJSON(stored)
	want, err := encodeJSON(MergePatch(refDoc, p))
	if err != nil {
		t.Fatalf("reference encode: %v", err)
	}
	got, err := mergeState(stored, p)
	if err != nil {
		t.Fatalf("merge %s with %s: %v", stored, patchS, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("merge %s with %s:\n got %s\nwant %s", stored, patchS, got, want)
	}
	// The patch is read, never changed: a store may merge twice.
	again, _ := mergeState(stored, p)
	if !bytes.Equal(again, got) {
		t.Fatalf("second merge differs: %s then %s", got, again)
	}
}

func TestMergeStateMatchesDecodedMerge(t *testing.T) {
	cases := [][2]string{
		{`{"a":"b"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`},
		{`{"a":["b"]}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`},
		{`{"a":1}`, `{"a":{"b":null,"c":{"d":null,"e":2}}}`},
		{`{"a":{"x":[1,{"y":"}"}],"z":"\"{"}}`, `{"a":{"x":null,"w":"<&>"}}`},
		{`{"é":1,"\u2028":"a\\b","ke\"y":{"n":1.50}}`, `{"ke\"y":{"m":12345678901234567890},"\t":true}`},
		{`{"current_goal":"gift","collected_fields":{"budget":50,"recipient":"sister"},"pending_questions":["age?"]}`,
			`{"collected_fields":{"budget":80,"recipient":null,"age":30},"pending_questions":null,"current_step":"search"}`},
		{`{"b":{},"a":[]}`, `{"b":{"c":{}},"a":{}}`},
	}
	for _, c := range cases {
		checkMergeState(t, c[0], c[1])
	}
}

func TestMergeStateFallsBackOnTextItCannotSplit(t *testing.T) {
	p := map[string]any{"a": json.Number("2")}
	// Duplicate keys and stray whitespace: never written by the service,
	// still merged as a decoder reads them (the last duplicate wins).
	got, err := mergeState(json.RawMessage(` { "b" : 1 , "b" : 3 } `), p)
	if err != nil || string(got) != `{"a":2,"b":3}` {
		t.Fatalf("got %s %v", got, err)
	}
	if got, err := mergeState(nil, p); err != nil || string(got) != `{"a":2}` {
		t.Fatalf("empty state: %s %v", got, err)
	}
	if _, err := mergeState(json.RawMessage(`{"a":`), p); err == nil {
		t.Fatal("a truncated state merged")
	}
}

func FuzzMergeState(f *testing.F) {
	f.Add(`{"a":{"b":1,"c":[1,2]},"d":"x"}`, `{"a":{"b":null,"e":{"f":null}},"d":null,"g":true}`)
	f.Add(`{"k\"":"}{","n":-1.5e3}`, `{"k\"":{"x":"]"}}`)
	f.Add(`{}`, `{"a":null}`)
	f.Fuzz(checkMergeState)
}

// screen is a Redactor with a JSON screen that calls everything clean.
type screen struct{ upper }

func (screen) CleanJSON([]byte) bool { return true }

func TestPlainMetadataNeedsTheRedactorsScreen(t *testing.T) {
	meta := []byte(`{"turn": 7, "lang": "en"}`)
	// A redactor that cannot screen JSON sees every string.
	if _, ok := NewService(nil, Options{Redactor: &upper{}}).plainMetadata(meta); ok {
		t.Fatal("metadata skipped a redactor without CleanJSON")
	}
	s := NewService(nil, Options{Redactor: &screen{}})
	got, ok := s.plainMetadata(meta)
	if !ok || string(got) != `{"turn":7,"lang":"en"}` {
		t.Fatalf("plain metadata %s %v, want it compacted", got, ok)
	}
	// Invalid or non-object metadata takes the decoding path, which words the error.
	for _, bad := range []string{`{"a":`, `[1]`, `"x"`, "{\"a\":\"\xff\"}"} {
		if _, ok := s.plainMetadata([]byte(bad)); ok {
			t.Fatalf("plain metadata accepted %q", bad)
		}
	}
}
