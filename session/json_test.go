package session

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

func TestMergePatchRFC7386(t *testing.T) {
	// The examples of RFC 7386, appendix A.
	cases := [][3]string{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, c := range cases {
		doc, _ := decodeJSON([]byte(c[0]))
		patch, _ := decodeJSON([]byte(c[1]))
		got, _ := encodeJSON(MergePatch(doc, patch))
		if !sameJSON(t, got, []byte(c[2])) {
			t.Errorf("merge %s with %s = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}

func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// FuzzMergePatch checks the in-place merge against a reference
// implementation (evanphx/json-patch) on object documents and patches.
func FuzzMergePatch(f *testing.F) {
	f.Add(`{"a":{"b":1,"c":[1,2]},"d":"x"}`, `{"a":{"b":null,"e":{"f":null}},"d":null,"g":true}`)
	f.Add(`{}`, `{"a":null}`)
	f.Add(`{"a":1}`, `{"a":{"b":{"c":{}}}}`)
	f.Fuzz(func(t *testing.T, docS, patchS string) {
		doc, err1 := decodeJSON([]byte(docS))
		patch, err2 := decodeJSON([]byte(patchS))
		if err1 != nil || err2 != nil {
			return
		}
		if _, ok := doc.(map[string]any); !ok {
			return
		}
		if _, ok := patch.(map[string]any); !ok {
			return
		}
		want, err := jsonpatch.MergePatch([]byte(docS), []byte(patchS))
		if err != nil {
			return // the reference refuses some inputs (e.g. duplicate keys); nothing to compare
		}
		got, err := encodeJSON(MergePatch(doc, patch))
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		if !sameJSON(t, got, want) {
			t.Fatalf("merge %s with %s: got %s, reference %s", docS, patchS, got, want)
		}
	})
}

// upper is a Redactor for tests: it upper-cases every string it is given.
type upper struct{ calls int }

func (u *upper) Protect(_ context.Context, _ string, texts []string) ([]string, error) {
	u.calls++
	out := make([]string, len(texts))
	for i, s := range texts {
		out[i] = strings.ToUpper(s)
	}
	return out, nil
}

func TestBatchRedactsKeysAndValuesInOneCall(t *testing.T) {
	var b batch
	v, _ := decodeJSON([]byte(`{"b":["x",{"k":"v"}],"a":1.50,"c":null,"d":"<&>"}`))
	i := b.addText("message")
	d := b.addDoc(v)
	u := &upper{}
	if err := b.protect(context.Background(), u, "t"); err != nil {
		t.Fatal(err)
	}
	out, err := b.doc(d)
	if err != nil {
		t.Fatal(err)
	}
	if u.calls != 1 || b.texts[i] != "MESSAGE" {
		t.Fatalf("calls %d text %q", u.calls, b.texts[i])
	}
	// Keys and values are redacted, numbers keep their text, HTML is not escaped.
	if want := `{"A":1.50,"B":["X",{"K":"V"}],"C":null,"D":"<&>"}`; !bytes.Equal(out, []byte(want)) {
		t.Fatalf("got %s, want %s", out, want)
	}
}
