package memory

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConversationInputs(t *testing.T) {
	d1 := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	d2 := time.Date(2023, 6, 2, 9, 0, 0, 0, time.UTC)
	var turns []ConversationTurn
	for i, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		turns = append(turns, ConversationTurn{ID: id, Session: "1", Speaker: []string{"Ann", "Ben"}[i%2], Text: "turn " + id, At: d1})
	}
	turns = append(turns,
		ConversationTurn{ID: "", Session: "1", Text: "no id: skipped"},
		ConversationTurn{ID: "b1", Session: "2", Speaker: "Ann", Text: "look", Caption: "a red kayak", At: d2},
		ConversationTurn{ID: "b2", Session: "2", Speaker: "Ben", Text: "  ", At: d2}, // no text: skipped
		ConversationTurn{ID: "b3", Session: "2", Speaker: "Ben", Text: "nice", At: d2})
	ix := ConversationIndexing{Window: 3, Speaker: true, Date: true, Captions: true}
	ins := ConversationInputs("s", turns, ix, ValidatedImported)
	var keys []string
	for _, in := range ins {
		keys = append(keys, in.Namespace+"/"+in.Key)
		if in.SubjectID != "s" || in.Provenance.SourceType != SourceMessage || in.Provenance.ValidatedBy != ValidatedImported || in.ValidFrom == nil {
			t.Fatalf("input %s = %+v", in.Key, in)
		}
	}
	// Stride defaults to 1 for a window of 3; windows stop at a session's end
	// and never cross into the next.
	want := []string{"/a1", "/a2", "/a3", "/a4", "/a5", "/b1", "/b3",
		"windows/window:a1..a3", "windows/window:a2..a4", "windows/window:a3..a5", "windows/window:b1..b3"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys = %q\nwant   %q", keys, want)
	}
	if got := ins[5].Text; got != "[2 June 2023] Ann: look [shares a photo: a red kayak]" {
		t.Fatalf("turn text = %q", got)
	}
	w := ins[len(ins)-1]
	if !reflect.DeepEqual(w.Provenance.MessageIDs, []string{"b1", "b3"}) || !strings.HasPrefix(w.Text, "[2 June 2023]\nAnn: look") || !w.ValidFrom.Equal(d2) {
		t.Fatalf("window = %+v", w)
	}
	dup := append([]ConversationTurn{{ID: " a1 ", Session: "1", Text: "first"}}, turns...)
	if got := ConversationInputs("s", dup, ConversationIndexing{}, ValidatedImported); len(got) != 8 || got[1].Key != "a1#2" || got[1].Provenance.MessageIDs[0] != "a1" || got[0].Key != "a1" {
		t.Fatalf("a repeated, spaced id: %+v", got[:2])
	}
	if got := ConversationInputs("s", turns, ConversationIndexing{}, ValidatedImported); len(got) != 7 || got[0].Text != "turn a1" {
		t.Fatalf("plain: %d inputs, first text %q", len(got), got[0].Text)
	}
	ix.Window, ix.Stride = 4, 0 // half overlap: starts 0, 2 (then the end is reached)
	var wins []string
	for _, in := range ConversationInputs("s", turns, ix, ValidatedImported) {
		if in.Namespace == DefaultWindowNamespace {
			wins = append(wins, in.Key)
		}
	}
	if !reflect.DeepEqual(wins, []string{"window:a1..a4", "window:a3..a5", "window:b1..b3"}) {
		t.Fatalf("windows of 4 = %q", wins)
	}
}
