package mcp

import (
	"bytes"
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
