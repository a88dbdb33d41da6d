package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mementohq/memento/internal/jsoncheck"
)

// ErrForbidden marks a binding failure of known credentials (a reader key, a
// key bound to another user): Handler answers it 403, any other 401.
var ErrForbidden = errors.New("forbidden")

// messageDepth bounds the nesting of a whole JSON-RPC message: the bound of
// a stored document (jsoncheck.MaxDepth) plus the envelope around a tool's
// arguments ({"params":{"arguments":{...}}}), as the HTTP API bounds a body.
const messageDepth = jsoncheck.MaxDepth + 3

// JSON-RPC error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// envelope is what the guard reads of a JSON-RPC message: a request has
// a method and an id, a notification a method only, a response an id only.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// checkMessage refuses a JSON-RPC message that the SDK would otherwise read
// leniently: malformed JSON, invalid UTF-8 or a lone surrogate (decoded to
// U+FFFD and stored changed), NUL, or nesting past messageDepth. It
// returns the error response to send (nil when the message is fine); a
// notification's refusal has no id, so none is answered.
func checkMessage(b []byte) (resp []byte, ok bool) {
	err := jsoncheck.Check(b, messageDepth)
	if err == nil {
		return nil, true
	}
	code, detail := codeInvalidRequest, err.Error()
	var je *jsoncheck.Error
	if errors.As(err, &je) && je.Kind == jsoncheck.Syntax {
		code = codeParseError
	}
	if errors.As(err, &je) && je.Kind == jsoncheck.Depth {
		detail = fmt.Sprintf("the message nests deeper than %d levels (a tool's arguments at most %d); flatten the arguments", messageDepth, jsoncheck.MaxDepth)
	}
	// The id, read leniently, so that the caller can match the refusal:
	// a duplicate member or deep nesting elsewhere in the message leaves a
	// readable id, and a client waits forever for an answer to its id.
	var env envelope
	_ = json.Unmarshal(b, &env)
	if len(env.ID) == 0 {
		env.ID, env.Method = topLevelMember(b, "id"), string(topLevelMember(b, "method"))
	}
	id := json.RawMessage("null")
	if len(env.ID) > 0 && validID(env.ID) {
		id = env.ID
	} else if code != codeParseError && env.Method != "" {
		return nil, false // a notification: nothing to answer
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": detail}})
	return out, false
}

// validID reports whether raw is a JSON-RPC id: a string or a number.
func validID(raw json.RawMessage) bool {
	if jsoncheck.Check(raw, 1) != nil {
		return false
	}
	c := raw[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// topLevelMember returns the raw value of a scalar member of the top-level
// object of b, found by scanning (no decoder's depth limit applies, and
// what follows the member may be malformed), or nil.
func topLevelMember(b []byte, name string) json.RawMessage {
	depth, expectKey := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			end := i + 1
			for end < len(b) && b[end] != '"' {
				if b[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(b) {
				return nil
			}
			if depth == 1 && expectKey {
				expectKey = false
				var key string
				if json.Unmarshal(b[i:end+1], &key) == nil && key == name {
					j := end + 1
					for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
						j++
					}
					if j < len(b) && b[j] == ':' {
						var v json.RawMessage
						if json.NewDecoder(bytes.NewReader(b[j+1:])).Decode(&v) == nil && len(v) > 0 && v[0] != '{' && v[0] != '[' {
							return v
						}
						return nil
					}
				}
			}
			i = end
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		}
	}
	return nil
}

// guardHTTP refuses, before the SDK reads it, a POSTed message that
// checkMessage refuses: 400 with the JSON-RPC error as the body.
func guardHTTP(h http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			status := http.StatusBadRequest
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "read the request body: "+err.Error(), status)
			return
		}
		if resp, ok := checkMessage(body); !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			if resp != nil {
				_, _ = w.Write(resp)
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// stdioGuard stands between stdin/stdout and the SDK's newline-delimited
// transport, which ends the whole connection at the first line it cannot
// decode. A malformed, oversized or refused line is answered with a
// JSON-RPC error and skipped; the rest are passed on. At the end of input
// it waits (at most drainWait) until every request passed on has its
// answer written, so that a client that sends and closes still gets them.
type stdioGuard struct {
	in      *bufio.Reader
	out     io.Writer
	maxLine int

	rest []byte // the passed-on line not yet read by the SDK

	mu      sync.Mutex
	outBuf  []byte          // SDK output not yet ended by a newline
	pending map[string]bool // ids of requests passed on and not yet answered
	settled chan struct{}   // closed and replaced when pending empties
}

// drainWait bounds the wait for answers after the end of input.
const drainWait = 30 * time.Second

func newStdioGuard(in io.Reader, out io.Writer, maxLine int) *stdioGuard {
	return &stdioGuard{in: bufio.NewReaderSize(in, 64<<10), out: out, maxLine: maxLine, pending: map[string]bool{}, settled: make(chan struct{})}
}

// Read passes on the next acceptable line.
func (g *stdioGuard) Read(p []byte) (int, error) {
	for len(g.rest) == 0 {
		line, tooLong, err := g.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				g.drain()
			}
			return 0, err
		}
		if tooLong {
			g.reply(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"a message is longer than %d bytes"}}`, codeInvalidRequest, g.maxLine))
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if resp, ok := checkMessage(line); !ok {
			if resp != nil {
				g.reply(resp)
			}
			continue
		}
		g.track(line)
		g.rest = append(append(g.rest[:0], line...), '\n')
	}
	n := copy(p, g.rest)
	g.rest = g.rest[n:]
	return n, nil
}

// readLine reads one line without its end; a line over maxLine is
// consumed to its end and reported as too long, not buffered.
func (g *stdioGuard) readLine() (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := g.in.ReadSlice('\n')
		if len(buf)+len(chunk) > g.maxLine+2 {
			tooLong, buf = true, nil
		} else if !tooLong {
			buf = append(buf, chunk...)
		}
		switch {
		case err == nil:
			return bytes.TrimRight(buf, "\r\n"), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(buf) > 0 || tooLong):
			return bytes.TrimRight(buf, "\r\n"), tooLong, nil // a last line without its newline
		default:
			return nil, false, err
		}
	}
}

// track notes the id of a request (a message with a method and an id).
func (g *stdioGuard) track(line []byte) {
	var env envelope
	if json.Unmarshal(line, &env) != nil || env.Method == "" || len(env.ID) == 0 || string(env.ID) == "null" {
		return
	}
	g.mu.Lock()
	g.pending[string(env.ID)] = true
	g.mu.Unlock()
}

// Write takes the SDK's output and writes it a whole line at a time, so
// that a refusal written by Read never lands inside an answer.
func (g *stdioGuard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.outBuf = append(g.outBuf, p...)
	for {
		i := bytes.IndexByte(g.outBuf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := g.outBuf[:i+1]
		if _, err := g.out.Write(line); err != nil {
			return 0, err
		}
		g.answered(line)
		g.outBuf = g.outBuf[i+1:]
	}
}

// answered clears the id of a response from pending (g.mu held).
func (g *stdioGuard) answered(line []byte) {
	var env envelope
	if json.Unmarshal(line, &env) != nil || env.Method != "" || len(env.ID) == 0 {
		return
	}
	if g.pending[string(env.ID)] {
		delete(g.pending, string(env.ID))
		if len(g.pending) == 0 {
			close(g.settled)
			g.settled = make(chan struct{})
		}
	}
}

// reply writes a response of the guard's own.
func (g *stdioGuard) reply(resp []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, _ = g.out.Write(append(resp, '\n'))
}

// drain waits until every passed-on request is answered, or drainWait.
func (g *stdioGuard) drain() {
	deadline := time.NewTimer(drainWait)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		n, ch := len(g.pending), g.settled
		g.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			return
		}
	}
}

// Close implements io.Closer for the transport; stdin and stdout stay open.
func (g *stdioGuard) Close() error { return nil }
