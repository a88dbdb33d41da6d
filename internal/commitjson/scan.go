package commitjson

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxDepth bounds the nesting of raw values read here; deeper documents are
// left to encoding/json (whose own limit is far higher).
const maxDepth = 256

// reader walks a JSON document. Every method reports false on anything it
// does not handle, valid JSON or not; the caller then gives up.
type reader struct {
	b []byte
	i int
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next skips whitespace and consumes c if it comes next.
func (r *reader) next(c byte) bool {
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// atEnd reports whether only whitespace is left.
func (r *reader) atEnd() bool {
	r.ws()
	return r.i == len(r.b)
}

// plain reads a string with no escapes and valid UTF-8, which
// encoding/json would decode to its bytes unchanged; the result aliases the input.
func (r *reader) plain() ([]byte, bool) {
	r.ws()
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return nil, false
	}
	start, ascii := r.i+1, true
	for j := start; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			s := r.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			r.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (r *reader) string() (string, bool) {
	s, ok := r.plain()
	return string(s), ok
}

// object reads an object, calling member with each key to read its value.
func (r *reader) object(member func(key []byte) bool) bool {
	if !r.next('{') {
		return false
	}
	if r.next('}') {
		return true
	}
	for {
		k, ok := r.plain()
		if !ok || !r.next(':') || !member(k) {
			return false
		}
		if r.next(',') {
			continue
		}
		return r.next('}')
	}
}

// int64 reads an integer literal; a fraction, an exponent, null or an
// overflow is left to encoding/json, which refuses them with its own words.
func (r *reader) int64() (int64, bool) {
	r.ws()
	start := r.i
	if !r.number() {
		return 0, false
	}
	s := r.b[start:r.i]
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return int64(-n), true
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

func (r *reader) int() (int, bool) {
	n, ok := r.int64()
	if !ok || (strconv.IntSize == 32 && (n < math.MinInt32 || n > math.MaxInt32)) {
		return 0, false
	}
	return int(n), true
}

// time reads a string literal and parses it as encoding/json does, with
// time.Time's UnmarshalJSON on the literal as written.
func (r *reader) time(t *time.Time) bool {
	r.ws()
	start := r.i
	if !r.str() {
		return false
	}
	return t.UnmarshalJSON(r.b[start:r.i]) == nil
}

// raw reads any JSON value but null (which encoding/json treats apart) and
// returns it as written, aliasing the input; its capacity ends with it, so
// an append never writes into the rest of the input.
func (r *reader) raw() (json.RawMessage, bool) {
	r.ws()
	start := r.i
	if start < len(r.b) && r.b[start] == 'n' {
		return nil, false
	}
	if !r.value(0) {
		return nil, false
	}
	return json.RawMessage(r.b[start:r.i:r.i]), true
}

// value skips one JSON value, checking its syntax.
func (r *reader) value(depth int) bool {
	r.ws()
	if r.i >= len(r.b) {
		return false
	}
	switch r.b[r.i] {
	case '{':
		if depth >= maxDepth {
			return false
		}
		r.i++
		if r.next('}') {
			return true
		}
		for {
			r.ws()
			if !r.str() || !r.next(':') || !r.value(depth+1) {
				return false
			}
			if r.next(',') {
				continue
			}
			return r.next('}')
		}
	case '[':
		if depth >= maxDepth {
			return false
		}
		r.i++
		if r.next(']') {
			return true
		}
		for {
			if !r.value(depth + 1) {
				return false
			}
			if r.next(',') {
				continue
			}
			return r.next(']')
		}
	case '"':
		return r.str()
	case 't':
		return r.word("true")
	case 'f':
		return r.word("false")
	case 'n':
		return r.word("null")
	default:
		return r.number()
	}
}

func (r *reader) word(w string) bool {
	if len(r.b)-r.i < len(w) || string(r.b[r.i:r.i+len(w)]) != w {
		return false
	}
	r.i += len(w)
	return true
}

// str skips a string literal at r.i, escapes included, checking its syntax.
// Like encoding/json, it lets any byte from 0x20 up through unchecked.
func (r *reader) str() bool {
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return false
	}
	for j := r.i + 1; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			r.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(r.b) {
				return false
			}
			switch r.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(r.b) {
					return false
				}
				for _, h := range r.b[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

// number skips a number literal at r.i, checking the JSON grammar.
func (r *reader) number() bool {
	b, j := r.b, r.i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j >= len(b):
		return false
	case b[j] == '0':
		j++
	case isDigit(b[j]):
		for j < len(b) && isDigit(b[j]) {
			j++
		}
	default:
		return false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if j >= len(b) || !isDigit(b[j]) {
			return false
		}
		for j < len(b) && isDigit(b[j]) {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || !isDigit(b[j]) {
			return false
		}
		for j < len(b) && isDigit(b[j]) {
			j++
		}
	}
	r.i = j
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
