package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// mergeState applies the merge patch p (decoded, already redacted) to a
// stored state. Members the patch does not touch keep their stored text, so
// a patch costs in proportion to the patch, not to the state; the result is
// what encodeJSON(MergePatch(decoded state, p)) gives. A state this fast
// path cannot split (it never writes one) is decoded the slow way.
func mergeState(state json.RawMessage, p map[string]any) (json.RawMessage, error) {
	if len(bytes.TrimSpace(state)) == 0 {
		state = json.RawMessage(`{}`)
	}
	if out, ok, err := mergeObject(state, p); err != nil {
		return nil, err
	} else if ok && json.Valid(out) {
		return out, nil
	}
	doc, err := decodeJSON(state)
	if err != nil {
		return nil, fmt.Errorf("stored state: %w", err)
	}
	return encodeJSON(MergePatch(doc, p))
}

// member is one member of a JSON object as written.
type member struct {
	key []byte // unescaped
	raw []byte // the key as written, quotes included; nil for a new key
	val []byte
}

// mergeObject merges p into the JSON object text obj; ok is false if obj
// is not an object it can split (or has a duplicate key).
func mergeObject(obj []byte, p map[string]any) (out []byte, ok bool, err error) {
	ms, ok := splitObject(obj)
	if !ok {
		return nil, false, nil
	}
	for k, v := range p {
		i := slices.IndexFunc(ms, func(m member) bool { return string(m.key) == k })
		if v == nil {
			if i >= 0 {
				ms = slices.Delete(ms, i, i+1)
			}
			continue
		}
		if pm, isObj := v.(map[string]any); isObj && i >= 0 && ms[i].val[0] == '{' {
			nv, ok, err := mergeObject(ms[i].val, pm)
			if err != nil || !ok {
				return nil, ok, err
			}
			ms[i].val = nv
			continue
		}
		enc, err := encodeJSON(MergePatch(nil, v))
		if err != nil {
			return nil, false, fmt.Errorf("encode state: %w", err)
		}
		if i >= 0 {
			ms[i].val = enc
		} else {
			ms = append(ms, member{key: []byte(k), val: enc})
		}
	}
	// encoding/json writes map keys in this order; the stored text follows it.
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	n := 2
	for i, m := range ms {
		if i > 0 && bytes.Equal(m.key, ms[i-1].key) {
			return nil, false, nil
		}
		n += len(m.raw) + len(m.val) + 2
	}
	buf := make([]byte, 0, n+16)
	buf = append(buf, '{')
	for i, m := range ms {
		if i > 0 {
			buf = append(buf, ',')
		}
		if m.raw == nil {
			k, err := encodeJSON(string(m.key))
			if err != nil {
				return nil, false, fmt.Errorf("encode state: %w", err)
			}
			m.raw = k
		}
		buf = append(buf, m.raw...)
		buf = append(buf, ':')
		buf = append(buf, m.val...)
	}
	return append(buf, '}'), true, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// splitObject splits the JSON object text b into its members. It trusts b
// to be valid JSON (mergeState checks what it writes) but never reads out
// of bounds on any input.
func splitObject(b []byte) ([]member, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	ms := make([]member, 0, 16)
	if i < len(b) && b[i] == '}' {
		return ms, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		ke, ok := skipString(b, i)
		if !ok {
			return nil, false
		}
		raw := b[i:ke]
		key, ok := unquote(raw)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		ve, ok := skipValue(b, i)
		if !ok {
			return nil, false
		}
		ms = append(ms, member{key: key, raw: raw, val: b[i:ve]})
		i = skipSpace(b, ve)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return ms, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, ok := skipString(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
		j++
	}
	return j, j > i
}

func unquote(raw []byte) ([]byte, bool) {
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return in, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}
