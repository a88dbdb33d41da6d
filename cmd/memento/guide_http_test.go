package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/mdcode"
)

const httpGuide = "../../docs/clients/http.md"

// TestHTTPGuide runs the sh blocks of docs/clients/http.md in order, as one
// bash script with MEMENTO set to a fresh `memento serve`, and checks each
// block's output against the text block that follows it in the guide: the
// same responses with the statuses shown, the headers shown and, in each
// body, the members shown ("..." in a string matches anything in its place).
// The shell blocks of the guide (starting the server) are not run.
func TestHTTPGuide(t *testing.T) {
	// The guide is curl: a machine without it fails here, it does not skip.
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed; the HTTP guide's examples need it (scripts/test.sh installs it as root): %v", tool, err)
		}
	}
	raw, err := os.ReadFile(httpGuide)
	if err != nil {
		t.Fatal(err)
	}
	blocks := mdcode.Blocks(string(raw))
	type step struct {
		sh   mdcode.Block
		want *mdcode.Block
	}
	var steps []step
	for i, b := range blocks {
		if b.Lang != "sh" {
			continue
		}
		s := step{sh: b}
		if i+1 < len(blocks) && blocks[i+1].Lang == "text" {
			s.want = &blocks[i+1]
		}
		steps = append(steps, s)
	}
	if len(steps) < 8 {
		t.Fatalf("%s has %d sh blocks; the guide lost its examples", httpGuide, len(steps))
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, s := range steps {
		fmt.Fprintf(&script, "printf '\\n%s\\n'\n# %s:%d\n%s", guideMarker(i), httpGuide, s.sh.Line, s.sh.Body)
	}

	addr, _, stop := startServe(t, "--data", t.TempDir())
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "MEMENTO=http://"+addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	outs := splitGuideOutput(stdout.String(), len(steps))
	for i, s := range steps {
		if i >= len(outs) {
			break
		}
		if s.want == nil {
			continue
		}
		if err := matchResponses(s.want.Body, outs[i]); err != nil {
			t.Errorf("%s:%d: the output is not what the guide shows at line %d: %v\n--- the block printed:\n%s", httpGuide, s.sh.Line, s.want.Line, err, outs[i])
		}
	}
	if runErr != nil || len(outs) < len(steps) {
		last := max(len(outs)-1, 0)
		t.Fatalf("the guide's script failed in the block at %s:%d: %v\nstderr:\n%s", httpGuide, steps[last].sh.Line, runErr, stderr.String())
	}
}

func guideMarker(i int) string { return fmt.Sprintf("@@memento-guide-block-%d@@", i) }

// splitGuideOutput cuts the script's stdout into each block's output, up to
// the last block that started.
func splitGuideOutput(out string, n int) []string {
	var outs []string
	for i := 0; i < n; i++ {
		start := strings.Index(out, guideMarker(i)+"\n")
		if start < 0 {
			break
		}
		start += len(guideMarker(i)) + 1
		end := len(out)
		if i+1 < n {
			if j := strings.Index(out, "\n"+guideMarker(i+1)); j >= 0 {
				end = j
			}
		}
		outs = append(outs, out[start:end])
	}
	return outs
}

var guideStatusLine = regexp.MustCompile(`([^\n])(HTTP/[0-9.]+ [0-9]{3} )`)

// guideResponse is one response as curl -i prints it, or a bare body.
type guideResponse struct {
	status  string
	headers map[string]string
	body    string
}

// parseResponses reads responses as curl -i prints them (status line,
// headers, blank line, body) one after another; text that starts with no
// status line is one bare body.
func parseResponses(text string) []guideResponse {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	// curl ends no body with a newline: the next status line follows on its line.
	text = guideStatusLine.ReplaceAllString(text, "$1\n$2")
	var out []guideResponse
	var cur *guideResponse
	inHeaders := false
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.body = strings.TrimSpace(body.String())
			out = append(out, *cur)
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		switch trimmed := strings.TrimRight(line, "\n"); {
		case strings.HasPrefix(trimmed, "HTTP/"):
			flush()
			cur = &guideResponse{status: trimmed, headers: map[string]string{}}
			inHeaders = true
		case inHeaders && trimmed == "":
			inHeaders = false
		case inHeaders:
			name, value, _ := strings.Cut(trimmed, ":")
			cur.headers[strings.ToLower(strings.TrimSpace(name))] = strings.TrimSpace(value)
		default:
			if cur == nil {
				cur = &guideResponse{}
			}
			body.WriteString(line)
		}
	}
	flush()
	return out
}

// matchResponses checks got (what curl printed) against want (what the
// guide shows): as many responses, the same status lines, the headers shown,
// and bodies whose JSON holds the members shown.
func matchResponses(want, got string) error {
	ws, gs := parseResponses(want), parseResponses(got)
	if len(ws) != len(gs) {
		return fmt.Errorf("the guide shows %d responses, the block printed %d", len(ws), len(gs))
	}
	for i, w := range ws {
		g := gs[i]
		if w.status != g.status {
			return fmt.Errorf("response %d: status %q, the guide shows %q", i+1, g.status, w.status)
		}
		for name, v := range w.headers {
			if gv, ok := g.headers[name]; !ok || !wildcardMatch(v, gv) {
				return fmt.Errorf("response %d: header %s is %q, the guide shows %q", i+1, name, gv, v)
			}
		}
		if w.body == "" {
			if g.body != "" {
				return fmt.Errorf("response %d: a body the guide does not show: %s", i+1, g.body)
			}
			continue
		}
		wv, err := jsonValues(w.body)
		if err != nil {
			return fmt.Errorf("response %d: the guide's body is not JSON: %v", i+1, err)
		}
		gv, err := jsonValues(g.body)
		if err != nil {
			return fmt.Errorf("response %d: the body is not JSON: %v", i+1, err)
		}
		if len(wv) != len(gv) {
			return fmt.Errorf("response %d: the guide shows %d JSON values, the block printed %d", i+1, len(wv), len(gv))
		}
		for j := range wv {
			if err := matchJSON("$", wv[j], gv[j]); err != nil {
				return fmt.Errorf("response %d: %v", i+1, err)
			}
		}
	}
	return nil
}

// jsonValues decodes the JSON values of s, one after another (a body, and
// what an echo printed after it).
func jsonValues(s string) ([]any, error) {
	var out []any
	dec := json.NewDecoder(strings.NewReader(s))
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// matchJSON: every member of a want object is in got and matches; a want
// array matches the first elements of got (an empty one only an empty one);
// a string with "..." matches any string with the same text around it;
// anything else is equal.
func matchJSON(path string, want, got any) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is %v, the guide shows an object", path, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s has no member %q", path, k)
			}
			if err := matchJSON(path+"."+k, wv, gv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) || (len(w) == 0 && len(g) != 0) {
			return fmt.Errorf("%s is %v, the guide shows %v", path, got, want)
		}
		for i := range w {
			if err := matchJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	case string:
		if g, ok := got.(string); ok && wildcardMatch(w, g) {
			return nil
		}
	default:
		if reflect.DeepEqual(want, got) {
			return nil
		}
	}
	return fmt.Errorf("%s is %v, the guide shows %v", path, got, want)
}

// wildcardMatch: want with "..." matches got with the text before and after it.
func wildcardMatch(want, got string) bool {
	before, after, ok := strings.Cut(want, "...")
	if !ok {
		return want == got
	}
	return len(got) >= len(before)+len(after) && strings.HasPrefix(got, before) && strings.HasSuffix(got, after)
}

// TestGuideMatcher: the checks of TestHTTPGuide fail on what they should.
func TestGuideMatcher(t *testing.T) {
	got := "HTTP/1.1 201 Created\r\nEtag: \"1\"\r\nLocation: /v1/x/abc\r\n\r\n{\"id\":\"abc\",\"n\":1,\"list\":[1,2],\"empty\":[]}HTTP/1.1 204 No Content\r\n\r\n"
	for _, c := range []struct {
		want string
		ok   bool
	}{
		{"HTTP/1.1 201 Created\nETag: \"1\"\nLocation: /v1/x/...\n\n{\"id\": \"...\", \"list\": [1]}\nHTTP/1.1 204 No Content\n", true},
		{"HTTP/1.1 200 OK\n\n{}\nHTTP/1.1 204 No Content\n", false},                         // status
		{"HTTP/1.1 201 Created\nETag: \"2\"\n\n{}\nHTTP/1.1 204 No Content\n", false},       // header value
		{"HTTP/1.1 201 Created\n\n{\"n\": 2}\nHTTP/1.1 204 No Content\n", false},            // number
		{"HTTP/1.1 201 Created\n\n{\"missing\": 1}\nHTTP/1.1 204 No Content\n", false},      // member
		{"HTTP/1.1 201 Created\n\n{\"list\": [2]}\nHTTP/1.1 204 No Content\n", false},       // element
		{"HTTP/1.1 201 Created\n\n{\"list\": []}\nHTTP/1.1 204 No Content\n", false},        // empty vs not
		{"HTTP/1.1 201 Created\n\n{\"id\": \"x...\"}\nHTTP/1.1 204 No Content\n", false},    // prefix
		{"HTTP/1.1 201 Created\n\n{}\n", false},                                             // count
		{"HTTP/1.1 201 Created\n\n{\"empty\": []}\nHTTP/1.1 204 No Content\n\n{}\n", false}, // body on 204
	} {
		if err := matchResponses(c.want, got); (err == nil) != c.ok {
			t.Errorf("matchResponses(%q) = %v, want ok %v", c.want, err, c.ok)
		}
	}
	if !wildcardMatch("snap_...", "snap_1") || wildcardMatch("snap_...x", "snap_") || !wildcardMatch("...", "") {
		t.Error("wildcardMatch")
	}
}
