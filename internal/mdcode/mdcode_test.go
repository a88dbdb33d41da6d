package mdcode

import "testing"

func TestBlocks(t *testing.T) {
	doc := "# Title\n\n```sh\ncurl -fsS x\necho ok\n```\n\ntext ``` inline\n\n```json title\n{\"a\": 1}\n```\n```\nplain\n```\n```go\nunclosed\n"
	got := Blocks(doc)
	want := []Block{
		{Lang: "sh", Info: "sh", Body: "curl -fsS x\necho ok\n", Line: 3},
		{Lang: "json", Info: "json title", Body: "{\"a\": 1}\n", Line: 10},
		{Lang: "", Info: "", Body: "plain\n", Line: 13},
		{Lang: "go", Info: "go", Body: "unclosed\n", Line: 16},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Lang != w.Lang || g.Info != w.Info || g.Body != w.Body || g.Line != w.Line {
			t.Errorf("block %d = %+v, want %+v", i, g, w)
		}
		if doc[g.Start:g.End] != g.Body {
			t.Errorf("block %d: offsets %d..%d do not hold its body", i, g.Start, g.End)
		}
	}
	if js := Lang(got, "json"); len(js) != 1 || js[0].Line != 10 {
		t.Errorf("Lang json = %+v", js)
	}
}
