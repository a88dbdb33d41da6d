package commitjson

import (
	"encoding/json"
	"strconv"
	"time"
)

// writer appends JSON as json.Marshal writes it (HTML escaping on). It
// stops at the first value it would have to escape or repair: ok turns false.
type writer struct {
	b  []byte
	ok bool
}

func (w *writer) lit(s string) { w.b = append(w.b, s...) }

func (w *writer) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

// str writes s if no byte of it needs escaping: printable ASCII other than
// '"', '\\' and the HTML-sensitive '<', '>', '&'.
func (w *writer) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.ok = false
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

func (w *writer) time(t time.Time) {
	w.b = append(w.b, '"')
	b, err := t.AppendText(w.b)
	if err != nil {
		w.ok = false
		return
	}
	w.b = append(b, '"')
}

// raw writes m compacted, as json.Marshal writes a json.RawMessage: null
// when nil; whitespace outside strings dropped. Invalid JSON and the bytes
// json.Marshal would escape ('<', '>', '&', U+2028, U+2029) stop the writer.
func (w *writer) raw(m json.RawMessage) {
	if m == nil {
		w.lit("null")
		return
	}
	r := reader{b: m}
	if !r.value(0) || !r.atEnd() {
		w.ok = false
		return
	}
	in, esc, seg := false, false, 0
	for i, c := range m {
		switch {
		case c == '<' || c == '>' || c == '&':
			w.ok = false
			return
		case c == 0xE2 && i+2 < len(m) && m[i+1] == 0x80 && m[i+2]&^1 == 0xA8:
			w.ok = false
			return
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			w.b = append(w.b, m[seg:i]...)
			seg = i + 1
		}
	}
	w.b = append(w.b, m[seg:]...)
}
