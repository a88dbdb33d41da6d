package extract

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tWord  tokKind = iota
	tPunct         // one punctuation rune; "\n" too
	tQuote         // a whole quoted span, quotes included: never read as the user's own words
)

// token is one word or mark of a message. Spans are byte offsets into the
// message, so values keep the user's spelling and case.
type token struct {
	w    string // lowercase, apostrophes folded to '
	s, e int
	kind tokKind
	cap  bool // the original starts with an upper-case letter
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// closingQuote is the quote that ends one opened by r, or 0 when r opens none.
func closingQuote(r rune) string {
	switch r {
	case '"', '“', '”':
		return "\"“”"
	case '«':
		return "»"
	case '„':
		return "“”\""
	}
	return ""
}

func lower(s string) string {
	// Fast path for ASCII, which is nearly every word.
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || (c >= 'A' && c <= 'Z') || c == '`' {
			return strings.Map(func(r rune) rune {
				switch r {
				case '’', '`', 'ʼ':
					return '\''
				}
				return unicode.ToLower(r)
			}, s)
		}
	}
	return s
}

// tokenize splits text into tokens, appending to out.
func tokenize(text string, out []token) []token {
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\n':
			out = append(out, token{w: "\n", s: i, e: i + n, kind: tPunct})
			i += n
		case unicode.IsSpace(r):
			i += n
		case isWordRune(r):
			j := i + n
			for j < len(text) {
				r2, n2 := utf8.DecodeRuneInString(text[j:])
				if isWordRune(r2) {
					j += n2
					continue
				}
				if (r2 == '\'' || r2 == '’' || r2 == '-' || r2 == '`' || r2 == 'ʼ') && j+n2 < len(text) {
					if r3, _ := utf8.DecodeRuneInString(text[j+n2:]); unicode.IsLetter(r3) || unicode.IsDigit(r3) {
						j += n2
						continue
					}
				}
				if r2 == '.' && isDigit(text[j-1]) && j+1 < len(text) && isDigit(text[j+1]) {
					j++
					continue
				}
				break
			}
			word := text[i:j]
			low := lower(word)
			if j < len(text) && text[j] == '.' && abbreviations[low] {
				j++
				low += "."
			}
			out = appendWord(out, word, low, i, j, unicode.IsUpper(r))
			i = j
		default:
			if closers := closingQuote(r); closers != "" {
				end := len(text)
				if k := strings.IndexAny(text[i+n:], closers); k >= 0 {
					_, cn := utf8.DecodeRuneInString(text[i+n+k:])
					end = i + n + k + cn
				}
				out = append(out, token{w: "\"", s: i, e: end, kind: tQuote})
				i = end
				continue
			}
			out = append(out, token{w: text[i : i+n], s: i, e: i + n, kind: tPunct})
			i += n
		}
	}
	return out
}

// appendWord expands contractions ("I'm" -> "i", "am") and splits a
// possessive 's off its word ("wife's" -> "wife", "'s").
func appendWord(out []token, word, low string, s, e int, capital bool) []token {
	if exp, ok := contractions[low]; ok {
		for k, w := range exp {
			out = append(out, token{w: w, s: s, e: e, cap: capital && k == 0})
		}
		return out
	}
	if len(low) > 2 && strings.HasSuffix(low, "'s") {
		apos := strings.LastIndexAny(word, "'’`ʼ")
		if apos > 0 {
			out = append(out, token{w: low[:len(low)-2], s: s, e: s + apos, cap: capital})
			return append(out, token{w: "'s", s: s + apos, e: e})
		}
	}
	return append(out, token{w: low, s: s, e: e, cap: capital})
}

// sentence is a run of tokens up to a terminal mark.
type sentence struct {
	t        []token
	question bool
}

func isTerminal(w string) bool {
	switch w {
	case ".", "!", "?", "\n", "…", "¿", "¡":
		return true
	}
	return false
}

// sentences splits tokens at terminal marks.
func sentences(toks []token, out []sentence) []sentence {
	start, i := 0, 0
	for i < len(toks) {
		if toks[i].kind != tPunct || !isTerminal(toks[i].w) {
			i++
			continue
		}
		end, q := i, false
		for i < len(toks) && toks[i].kind == tPunct && isTerminal(toks[i].w) {
			q = q || toks[i].w == "?"
			i++
		}
		if end > start {
			out = append(out, sentence{t: toks[start:end], question: q})
		}
		start = i
	}
	if start < len(toks) {
		out = append(out, sentence{t: toks[start:]})
	}
	return out
}

// subjectWords open a clause the rules can read.
var subjectWords = set("i", "my", "я", "меня", "мой", "моя", "мне", "у", "call")

var clauseJoiners = set(",", "and", "but", "or", "though", "although", "while", "whereas",
	"plus", "yet", "so", "и", "а", "но", "-", "–", "—", ":")

// clauses splits a sentence where a joiner is followed by a new subject:
// "I love tea but I hate coffee" is two clauses, "I love tea and coffee" one.
func clauses(t []token, out [][]token) [][]token {
	start := 0
	for i := 1; i < len(t); i++ {
		if t[i].kind == tPunct && t[i].w == ";" {
			if i > start {
				out = append(out, t[start:i])
			}
			start = i + 1
			continue
		}
		if !clauseJoiners[t[i].w] || t[i].kind == tQuote {
			continue
		}
		j := i
		for j < len(t) && (clauseJoiners[t[j].w] || correctionMarkers[t[j].w]) {
			j++
		}
		if j < len(t) && j > i && subjectWords[t[j].w] && hasContent(t[start:i]) {
			if i > start {
				out = append(out, t[start:i])
			}
			start = i
		}
		i = j - 1 // the run of joiners is read once
		if i < start {
			i = start
		}
	}
	if start < len(t) {
		out = append(out, t[start:])
	}
	return out
}

// hasContent reports whether a clause holds more than openers ("actually,").
func hasContent(t []token) bool {
	for _, tk := range t {
		if tk.kind == tWord && !fillers[tk.w] && !correctionMarkers[tk.w] {
			return true
		}
	}
	return false
}
