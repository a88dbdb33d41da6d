package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestStdioGuardSkipsLongLines: a line over the bound is answered and
// dropped without being buffered whole; the next line is passed on.
func TestStdioGuardSkipsLongLines(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	in := `{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("a", 200_000) + `"}` + "\n" + ok + "\n"
	var out bytes.Buffer
	g := newStdioGuard(strings.NewReader(in), &out, 100)
	got, err := io.ReadAll(io.LimitReader(g, int64(len(ok)+1)))
	if err != nil || string(got) != ok+"\n" {
		t.Fatalf("passed on %q, %v; want the second line", got, err)
	}
	if !strings.Contains(out.String(), `"code":-32600`) || !strings.Contains(out.String(), "longer than 100 bytes") {
		t.Fatalf("answer to the long line: %q", out.String())
	}
}

// TestRefusalEchoesTheID: a message refused for a duplicate member or for
// nesting too deep still has a readable id, and its refusal carries it
// (it was null, and the client waited for an answer to its id forever); a
// notification refused alike gets no answer.
func TestRefusalEchoesTheID(t *testing.T) {
	deep := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	cases := []struct {
		msg, id string
	}{
		{`{"jsonrpc":"2.0","id":106,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"Rex","query":"x"}}}`, `106`},
		{`{"jsonrpc":"2.0","id":104,"method":"tools/call","params":{"name":"memory_add","arguments":{"value":` + deep + `}}}`, `104`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"value":` + deep + `}},"id":"late-\"id"}`, `"late-\"id"`},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"a":1,"a":2}}`, `null`},
	}
	for _, c := range cases {
		resp, ok := checkMessage([]byte(c.msg))
		if ok || !strings.Contains(string(resp), `"id":`+c.id+`,`) && !strings.HasSuffix(string(resp), `"id":`+c.id+`}`) {
			t.Errorf("%.80s: %s, want id %s", c.msg, resp, c.id)
		}
	}
	if resp, ok := checkMessage([]byte(`{"jsonrpc":"2.0","method":"notifications/x","params":{"v":` + deep + `}}`)); ok || resp != nil {
		t.Errorf("a refused notification was answered: %s", resp)
	}
	if resp, _ := checkMessage([]byte(`{"jsonrpc":"2.0","id":1,"params":{"v":` + deep + `}}`)); !strings.Contains(string(resp), "at most 64") {
		t.Errorf("depth refusal: %s", resp)
	}
}

// TestDecodeProblemNamesNoGoTypes: an argument of the wrong type is told in
// the arguments' terms, not Go's.
func TestDecodeProblemNamesNoGoTypes(t *testing.T) {
	var in struct {
		Seqs []int64 `json:"message_seqs"`
		Name string  `json:"name"`
	}
	for raw, want := range map[string]string{
		`{"message_seqs":[1180591620717411303424]}`: "message_seqs",
		`{"name":[1]}`: "name: array is not a string",
	} {
		err := json.Unmarshal([]byte(raw), &in)
		got := decodeProblem(err)
		if !strings.Contains(got, want) || strings.Contains(got, "Go ") || strings.Contains(got, "int64") {
			t.Errorf("%s: %q", raw, got)
		}
	}
}
