package postgres

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// jsonbText reproduces in Go the text PostgreSQL returns for a value cast
// to jsonb (jsonb_out in a UTF8 database): whitespace dropped, ", " and ": "
// between items, object keys sorted by byte length and then bytes with the
// last of duplicate keys kept, \u escapes decoded, strings escaped as
// escape_json does, -0 written 0. The commit hashes that text into the
// chain (run.ChainNext over what the store returns), so computing it here
// spares the database the re-encoding and the hashing.
//
// It answers ok false for anything it does not reproduce exactly (numbers
// with an exponent, whose scale numeric_in recomputes; nesting deeper than
// jsonbMaxDepth; numbers longer than jsonbMaxNumber) and for input
// PostgreSQL refuses (invalid JSON, \u0000, a lone surrogate): the caller
// then leaves the work, and the error, to PostgreSQL. TestJSONBText checks
// it against the server.
const (
	jsonbMaxDepth  = 64
	jsonbMaxNumber = 200
)

// jsonbMember is one member of an object in jsonb order: its decoded key and
// its value as jsonb text.
type jsonbMember struct {
	key string
	val []byte
}

// jsonbObject is jsonbText for a JSON object, with its members in jsonb
// order (their values slices of text).
func jsonbObject(b []byte) (text []byte, members []jsonbMember, ok bool) {
	p := jsonbParser{in: b}
	p.ws()
	if p.pos >= len(p.in) || p.in[p.pos] != '{' {
		return nil, nil, false
	}
	text, members, ok = p.object(make([]byte, 0, len(b)+len(b)/8+8), true)
	if !ok {
		return nil, nil, false
	}
	p.ws()
	if p.pos != len(p.in) {
		return nil, nil, false
	}
	return text, members, true
}

// jsonbText is the jsonb text of any JSON value.
func jsonbText(b []byte) ([]byte, bool) {
	p := jsonbParser{in: b}
	p.ws()
	out, ok := p.value(make([]byte, 0, len(b)+len(b)/8+8))
	if !ok {
		return nil, false
	}
	p.ws()
	if p.pos != len(p.in) {
		return nil, false
	}
	return out, true
}

type jsonbParser struct {
	in    []byte
	pos   int
	depth int
}

func (p *jsonbParser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value appends the jsonb text of the value at pos to dst.
func (p *jsonbParser) value(dst []byte) ([]byte, bool) {
	if p.pos >= len(p.in) {
		return nil, false
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		out, _, ok := p.object(dst, false)
		return out, ok
	case c == '[':
		return p.array(dst)
	case c == '"':
		s, ok := p.str(nil)
		if !ok {
			return nil, false
		}
		return appendJSONBString(dst, s), true
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(dst)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
				p.pos += len(lit)
				return append(dst, lit...), true
			}
		}
		return nil, false
	}
}

type jsonbPair struct {
	key        []byte
	start, end int // of the value's text in the object's buffer
}

// object appends the object at pos; withMembers also returns its members,
// their values slices of the returned text.
func (p *jsonbParser) object(dst []byte, withMembers bool) ([]byte, []jsonbMember, bool) {
	if p.depth++; p.depth > jsonbMaxDepth {
		return nil, nil, false
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	var (
		pairs []jsonbPair
		buf   []byte
	)
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(dst, "{}"...), []jsonbMember{}, true
	}
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, nil, false
		}
		key, ok := p.str(nil)
		if !ok {
			return nil, nil, false
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, nil, false
		}
		p.pos++
		p.ws()
		start := len(buf)
		if buf, ok = p.value(buf); !ok {
			return nil, nil, false
		}
		pairs = append(pairs, jsonbPair{key: key, start: start, end: len(buf)})
		p.ws()
		if p.pos >= len(p.in) {
			return nil, nil, false
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return nil, nil, false
		}
		p.pos++
		break
	}
	// jsonb order; of equal keys the stable sort keeps input order, and the
	// last one wins.
	slices.SortStableFunc(pairs, func(a, b jsonbPair) int {
		if len(a.key) != len(b.key) {
			return len(a.key) - len(b.key)
		}
		return bytes.Compare(a.key, b.key)
	})
	kept := pairs[:0]
	for i, pr := range pairs {
		if i+1 < len(pairs) && bytes.Equal(pairs[i+1].key, pr.key) {
			continue
		}
		kept = append(kept, pr)
	}
	objStart := len(dst)
	dst = append(dst, '{')
	for i, pr := range kept {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendJSONBString(dst, pr.key)
		dst = append(dst, ": "...)
		dst = append(dst, buf[pr.start:pr.end]...)
	}
	dst = append(dst, '}')
	if !withMembers {
		return dst, nil, true
	}
	return dst, reslice(dst[objStart:], kept), true
}

// reslice finds each kept member's value in the finished object text
// (once it is finished, because appending may move it).
func reslice(text []byte, kept []jsonbPair) []jsonbMember {
	out := make([]jsonbMember, len(kept))
	pos := 1 // after {
	for i, pr := range kept {
		if i > 0 {
			pos += 2 // ", "
		}
		pos += len(appendJSONBString(nil, pr.key)) + 2 // key and ": "
		n := pr.end - pr.start
		out[i] = jsonbMember{key: string(pr.key), val: text[pos : pos+n : pos+n]}
		pos += n
	}
	return out
}

func (p *jsonbParser) array(dst []byte) ([]byte, bool) {
	if p.depth++; p.depth > jsonbMaxDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	p.ws()
	dst = append(dst, '[')
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), true
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ", "...)
		}
		p.ws()
		var ok bool
		if dst, ok = p.value(dst); !ok {
			return nil, false
		}
		p.ws()
		if p.pos >= len(p.in) {
			return nil, false
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != ']' {
			return nil, false
		}
		p.pos++
		return append(dst, ']'), true
	}
}

// number appends a JSON number without exponent as numeric_out writes it:
// unchanged, except that a negative zero loses its sign.
func (p *jsonbParser) number(dst []byte) ([]byte, bool) {
	start := p.pos
	neg := p.in[p.pos] == '-'
	if neg {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	n := digits()
	if n == 0 || (n > 1 && p.in[intStart] == '0') {
		return nil, false
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, false
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		return nil, false
	}
	num := p.in[start:p.pos]
	if len(num) > jsonbMaxNumber {
		return nil, false
	}
	if neg && bytes.Trim(num[1:], "0.") == nil {
		num = num[1:]
	}
	return append(dst, num...), true
}

// str decodes the string at pos, appending its bytes to dst.
func (p *jsonbParser) str(dst []byte) ([]byte, bool) {
	p.pos++ // "
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			if dst == nil {
				dst = []byte{}
			}
			return dst, true
		case c == '\\':
			if p.pos+1 >= len(p.in) {
				return nil, false
			}
			e := p.in[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok || r == 0 {
					return nil, false
				}
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					if p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
						return nil, false
					}
					p.pos += 2
					lo, ok := p.hex4()
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, false
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				case r >= 0xDC00 && r <= 0xDFFF:
					return nil, false
				}
				dst = utf8.AppendRune(dst, r)
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false
			}
			dst = append(dst, p.in[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return nil, false
}

func (p *jsonbParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// appendJSONBString writes s (decoded bytes) as escape_json does.
func appendJSONBString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range s {
		switch c {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"')
}
