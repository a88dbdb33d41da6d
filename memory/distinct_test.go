package memory

import "testing"

func TestDropCovered(t *testing.T) {
	hit := func(key string, ids ...string) Hit {
		return Hit{Claim: Claim{Key: key, Provenance: Provenance{MessageIDs: ids}}}
	}
	in := []Hit{
		hit("w1", "m1", "m2", "m3"),
		hit("t2", "m2"),       // inside w1: dropped
		hit("t4", "m4"),       // new
		hit("w2", "m3", "m4"), // both named above: dropped
		hit("w3", "m4", "m5"), // m5 is new: kept
		hit("none"),           // no message ids: kept
		hit("none2"),
	}
	got := dropCovered(in)
	var keys []string
	for _, h := range got {
		keys = append(keys, h.Key)
	}
	want := []string{"w1", "t4", "w3", "none", "none2"}
	if len(keys) != len(want) {
		t.Fatalf("kept %v, want %v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("kept %v, want %v", keys, want)
		}
	}
}
