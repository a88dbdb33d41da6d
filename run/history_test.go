package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// randomValue is a JSON value of about size bytes: objects and arrays
// nested a few levels, strings with escapes and non-ASCII text.
func randomValue(rng *rand.Rand, size, depth int) any {
	if size < 40 || depth > 5 {
		switch rng.IntN(4) {
		case 0:
			return rng.IntN(1000)
		case 1:
			return strings.Repeat("é<&>\"\n", 1+rng.IntN(4))
		case 2:
			return nil
		default:
			return strings.Repeat("x", size)
		}
	}
	n := 2 + rng.IntN(8)
	if rng.IntN(2) == 0 {
		xs := make([]any, n)
		for i := range xs {
			xs[i] = randomValue(rng, size/n, depth+1)
		}
		return xs
	}
	m := map[string]any{}
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("k%d%s", rng.IntN(20), strings.Repeat("é", rng.IntN(2)))] = randomValue(rng, size/n, depth+1)
	}
	return m
}

// mutate changes v a little: a leaf replaced, an element appended or
// dropped, a member added or removed, somewhere inside.
func mutate(rng *rand.Rand, v any) any {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 || rng.IntN(5) == 0 {
			switch rng.IntN(3) {
			case 0:
				return append(x, randomValue(rng, 60, 4))
			case 1:
				if len(x) > 0 {
					return x[:len(x)-1]
				}
			}
			return randomValue(rng, 60, 4)
		}
		i := rng.IntN(len(x))
		x[i] = mutate(rng, x[i])
		return x
	case map[string]any:
		if len(x) == 0 || rng.IntN(5) == 0 {
			if rng.IntN(2) == 0 {
				x[fmt.Sprintf("new%d", rng.IntN(50))] = randomValue(rng, 80, 4)
			} else {
				for k := range x {
					delete(x, k)
					break
				}
			}
			return x
		}
		for k := range x {
			x[k] = mutate(rng, x[k])
			break
		}
		return x
	default:
		return randomValue(rng, 30, 5)
	}
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %.80s: %v", b, err)
	}
	return v
}

// Every delta, applied after up to SnapshotEvery-1 others, rebuilds the
// state exactly, and a step that edits inside a large member stores far
// less than the member.
func TestDeltaRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := 0; trial < 40; trial++ {
		state := map[string]any{"big": randomValue(rng, 4000, 0), "list": randomValue(rng, 3000, 0), "n": 0}
		snap, _ := json.Marshal(state)
		prev := snap
		var deltas []json.RawMessage
		for step := 1; step < SnapshotEvery; step++ {
			state["n"] = step
			state["list"] = mutate(rng, state["list"])
			if step%4 == 0 {
				state["big"] = mutate(rng, state["big"])
			}
			next, _ := json.Marshal(state)
			d, err := MakeDelta(prev, next)
			if err != nil {
				t.Fatal(err)
			}
			deltas = append(deltas, d)
			got, err := ApplyDeltas(snap, deltas)
			if err != nil {
				t.Fatalf("trial %d step %d: apply: %v\ndelta %s", trial, step, err, d)
			}
			if !reflect.DeepEqual(decodeNumbers(t, got), decodeNumbers(t, next)) {
				t.Fatalf("trial %d step %d: rebuilt\n%s\nwant\n%s\ndelta %s", trial, step, got, next, d)
			}
			prev = next
		}
	}

	// One element of a 100-element array of 1 KB records replaced: the
	// delta names that element.
	items := make([]string, 100)
	for i := range items {
		items[i] = strings.Repeat("a", 1000)
	}
	a, _ := json.Marshal(map[string]any{"items": items, "step": 1})
	items[42] = strings.Repeat("b", 1000)
	b, _ := json.Marshal(map[string]any{"items": items, "step": 2})
	d, err := MakeDelta(a, b)
	if err != nil || len(d) > 1200 || !bytes.Contains(d, []byte(`"42"`)) {
		t.Fatalf("delta of one replaced element: %d bytes (%v): %.200s", len(d), err, d)
	}
}

// Deltas that do not fit the state they are applied to are refused, never
// applied half or made to panic.
func TestApplyDeltasRefusesMisfits(t *testing.T) {
	snap := json.RawMessage(`{"a":[1,2,3],"o":{"x":1}}`)
	for _, d := range []string{
		`{"d":[],"n":{"a":{"d":[],"l":5,"s":{"3":1}}},"s":{}}`,                // leaves element 4 unset
		`{"d":[],"n":{"a":{"d":[],"l":2,"s":{"2":1}}},"s":{}}`,                // index past the end
		`{"d":[],"n":{"a":{"d":[],"l":-1,"s":{}}},"s":{}}`,                    // negative length
		`{"d":[],"n":{"a":{"d":[],"l":1,"s":{"x":1}}},"s":{}}`,                // not an index
		`{"d":[],"n":{"o":{"d":[],"l":1,"s":{"0":1}}},"s":{}}`,                // array change to an object
		`{"d":[],"n":{"a":{"d":["x"],"s":{}}},"s":{}}`,                        // object change to an array
		`{"d":[],"n":{"missing":{"d":[],"s":{}}},"s":{}}`,                     // absent member
		`{"d":[],"n":{"o":{"d":[],"n":{"x":{"d":[],"s":{}}},"s":{}}},"s":{}}`, // into a number
		`[1]`,
	} {
		if got, err := ApplyDeltas(snap, []json.RawMessage{json.RawMessage(d)}); err == nil {
			t.Errorf("delta %s applied: %s", d, got)
		}
	}
}

func FuzzDelta(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,3],"o":{"x":"`+strings.Repeat("y", 600)+`"}}`), []byte(`{"a":[1,2],"o":{"x":"`+strings.Repeat("y", 599)+`"}}`))
	f.Add([]byte(`{"l":[`+strings.Repeat(`"abcdefgh",`, 80)+`1]}`), []byte(`{"l":[`+strings.Repeat(`"abcdefgh",`, 81)+`2]}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var va, vb map[string]any
		if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil || va == nil || vb == nil {
			return
		}
		d, err := MakeDelta(a, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ApplyDeltas(a, []json.RawMessage{d})
		if err != nil {
			t.Fatalf("apply %s: %v", d, err)
		}
		var vg map[string]any
		if err := json.Unmarshal(got, &vg); err != nil || !reflect.DeepEqual(vg, vb) {
			t.Fatalf("rebuilt %s, want %s (%v)", got, b, err)
		}
	})
}

// BenchmarkMakeDelta: one element of a large array changes. "records" is
// 100 elements of 1 KB (the shape bench scale measures), "numbers" 250,000
// one-digit elements, where splitting the array is most of the work.
func BenchmarkMakeDelta(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		elem func(i int) string
	}{
		{"records", 100, func(int) string { return `"` + strings.Repeat("abcdefgh", 128) + `"` }},
		{"numbers", 250000, func(i int) string { return fmt.Sprint(i % 10) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			xs := make([]string, c.n)
			for i := range xs {
				xs[i] = c.elem(i)
			}
			from := json.RawMessage(`{"step":1,"items":[` + strings.Join(xs, ",") + `]}`)
			xs[c.n/2] = `"changed"`
			to := json.RawMessage(`{"step":2,"items":[` + strings.Join(xs, ",") + `]}`)
			b.SetBytes(int64(len(to)))
			for b.Loop() {
				if d, err := MakeDelta(from, to); err != nil || len(d) > 200 {
					b.Fatalf("delta of %d bytes (%v)", len(d), err)
				}
			}
		})
	}
}
