package pii

import (
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Kind names a category of personal data.
type Kind string

// The kinds the redactor detects. The names appear in references ("pii:email:<id>").
const (
	KindEmail Kind = "email"
	KindPhone Kind = "phone"
	KindCard  Kind = "card"
	KindIBAN  Kind = "iban"
)

// AllKinds lists every detectable kind, in precedence order: when two matches
// overlap, the earlier kind wins (an IBAN's digits are not also a phone number).
var AllKinds = []Kind{KindIBAN, KindCard, KindEmail, KindPhone}

// Finding is one detected value: Text[Start:End] == Value.
type Finding struct {
	Kind  Kind
	Start int
	End   int
	Value string
}

// Detection patterns. They are deliberately conservative where a false
// positive would destroy useful data (order numbers, dates, amounts): phone
// numbers need a '+' country code, a trunk '0', or a NANP shape.
var (
	// The local part takes RFC 5322's atext (apostrophes included: a name
	// like o'neil must not leave its first half in clear) and, as the domain,
	// letters of any script (internationalised addresses).
	emailRE = regexp.MustCompile(`[\p{L}\p{N}_%+\-!#$&*/=?^{|}~][\p{L}\p{N}._%+\-'!#$&*/=?^{|}~]{0,63}@[\p{L}\p{N}](?:[\p{L}\p{N}\-]{0,62}[\p{L}\p{N}])?(?:\.[\p{L}\p{N}](?:[\p{L}\p{N}\-]{0,62}[\p{L}\p{N}])?)*\.\p{L}{2,24}`)
	// 13-19 digits, optionally grouped by single spaces (no-break and thin
	// ones too) or dashes, or in dotted groups of four.
	cardRE = regexp.MustCompile(`\d(?:[ \-\x{00A0}\x{2009}\x{202F}]?\d){12,18}|\d{4}\.\d{4}\.\d{4}\.\d{1,7}`)
	// Country code, 2 check digits, then up to 30 alphanumerics in groups of up to 4.
	ibanRE = regexp.MustCompile(`(?i)[a-z]{2}\d{2}(?: ?[a-z0-9]{1,4}){3,8}`)
	// +CC ... or 00CC ..., a trunk 0 with an area code (0X..., 020 7946
	// 0958), (NNN) NNN-NNNN, [1 ]NNN-NNN-NNNN with dashes, dots or spaces.
	phoneRE = regexp.MustCompile(`(?:\+|00)\d(?:[ .\-]?\(?\d\)?){6,16}|\(\d{3}\) ?\d{3}[ .\-]\d{4}|(?:1[ .\-])?\d{3}[.\- ]\d{3}[.\- ]\d{4}|0\d{1,4}(?:[ .\-]?\d{2,4}){2,5}`)
	// References the vault issued; never redacted again.
	refRE = regexp.MustCompile(`pii:(?:email|phone|card|iban):[a-z]{26}`)
)

// Detect returns the personal data found in s among kinds, in order of
// position, without overlaps. Existing vault references are never reported.
// Kinds are searched in precedence order (AllKinds), each on the text with
// the earlier findings blanked out, so a greedy look-alike of a weaker kind
// cannot hide a value next to it.
func Detect(s string, kinds []Kind) []Finding {
	if len(s) < 6 {
		return nil
	}
	// Cheap necessary conditions first: most text has no '@' and few
	// digits, and then no pattern needs to run at all.
	digits, at := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '@':
			at = true
		}
	}
	need := func(k Kind) bool { return mayHold(k, digits, at) }
	var masked []byte // s with references and earlier findings blanked; made on first use
	text := s
	blank := func(start, end int) {
		if masked == nil {
			masked = []byte(s)
		}
		for i := start; i < end; i++ {
			masked[i] = 0
		}
		text = string(masked)
	}
	if strings.Contains(s, RefPrefix) {
		for _, loc := range refRE.FindAllStringIndex(s, -1) {
			blank(loc[0], loc[1])
		}
	}
	var out []Finding
	for _, k := range AllKinds {
		if !need(k) || !slices.Contains(kinds, k) {
			continue
		}
		var fs []Finding
		switch k {
		case KindIBAN:
			fs = appendMatches(nil, text, k, ibanRE, trimIBAN)
		case KindCard:
			fs = appendMatches(nil, text, k, cardRE, validCard)
		case KindEmail:
			fs = appendMatches(nil, text, k, emailRE, validEmail)
		case KindPhone:
			fs = appendMatches(nil, text, k, phoneRE, validPhone)
		}
		for _, f := range fs {
			f.Value = s[f.Start:f.End]
			blank(f.Start, f.End)
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// mayHold is the necessary condition for a text to hold a value of kind k,
// given how many ASCII digits it has and whether it has an '@'. The
// patterns match ASCII only (RE2's \d is [0-9]).
func mayHold(k Kind, digits int, at bool) bool {
	switch k {
	case KindEmail:
		return at
	case KindCard:
		return digits >= 13
	case KindPhone:
		return digits >= 8
	case KindIBAN:
		return digits >= 4
	}
	return false
}

// appendMatches adds the matches of re that check accepts. check returns the
// end of the accepted value (it may shrink the match) or -1. A rejected match
// is retried one byte further on, so a greedy match that swallowed a
// neighbour does not hide a valid value next to it.
func appendMatches(dst []Finding, s string, k Kind, re *regexp.Regexp, check func(s string, start, end int) int) []Finding {
	pos := 0
	for pos < len(s) {
		loc := re.FindStringIndex(s[pos:])
		if loc == nil {
			break
		}
		start, end := pos+loc[0], pos+loc[1]
		if e := check(s, start, end); e > start {
			dst = append(dst, Finding{Kind: k, Start: start, End: e, Value: s[start:e]})
			pos = e
			continue
		}
		pos = start + 1
	}
	return dst
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isAlnum(b byte) bool {
	return isDigit(b) || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// shrink returns the longest end in (start, end] that does not cut a token
// (the byte before it is alphanumeric, the byte after it is not glued) and
// that ok accepts, or -1.
func shrink(s string, start, end int, glued func(byte) bool, ok func(e int) bool) int {
	for e := end; e > start; e-- {
		if !isAlnum(s[e-1]) || (e < len(s) && glued(s[e])) {
			continue
		}
		if ok(e) {
			return e
		}
	}
	return -1
}

func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// Luhn reports whether the digit string passes the Luhn checksum.
func Luhn(digits string) bool {
	if len(digits) == 0 {
		return false
	}
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		c := digits[i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// validCard accepts 13-19 Luhn-valid digits not glued to other digits
// (letters may touch: "card:4111..." or "INV4111...").
func validCard(s string, start, end int) int {
	if start > 0 && isDigit(s[start-1]) {
		return -1
	}
	return shrink(s, start, end, isDigit, func(e int) bool {
		d := digitsOf(s[start:e])
		// A run of one repeated digit can pass Luhn; it is filler, not a card.
		return len(d) >= 13 && len(d) <= 19 && Luhn(d) && strings.Count(d, d[:1]) != len(d)
	})
}

func validEmail(s string, start, end int) int {
	v := s[start:end]
	local := v[:strings.IndexByte(v, '@')]
	if local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return -1
	}
	return end
}

// dateRE recognises dd.mm.yyyy-like dates, which the trunk-prefix phone shape also matches.
var dateRE = regexp.MustCompile(`^\d{2}[./\-]\d{2}[./\-]\d{2,4}$`)

func validPhone(s string, start, end int) int {
	if start > 0 && isDigit(s[start-1]) {
		return -1
	}
	return shrink(s, start, end, isDigit, func(e int) bool {
		v := s[start:e]
		n := len(digitsOf(v))
		return n >= 8 && n <= 15 && !dateRE.MatchString(v)
	})
}

// ibanLengths are the registered IBAN lengths of common countries; a country
// not listed is accepted on the checksum and the general 15-34 bound.
var ibanLengths = map[string]int{
	"AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24, "DE": 22,
	"DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27, "HR": 21,
	"HU": 28, "IE": 22, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
	"MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "RO": 24, "SE": 24,
	"SI": 19, "SK": 24, "SM": 27, "TR": 26, "UA": 29,
}

// trimIBAN accepts the longest prefix of the match that is a valid IBAN and
// not glued to other letters or digits, so trailing words are not swallowed.
func trimIBAN(s string, start, end int) int {
	if start > 0 && isAlnum(s[start-1]) {
		return -1
	}
	return shrink(s, start, end, isAlnum, func(e int) bool { return ValidIBAN(s[start:e]) })
}

// ValidIBAN checks length and the ISO 13616 mod-97 checksum; spaces are ignored.
func ValidIBAN(v string) bool {
	v = strings.ToUpper(strings.ReplaceAll(v, " ", ""))
	if len(v) < 15 || len(v) > 34 {
		return false
	}
	if want, ok := ibanLengths[v[:2]]; ok && len(v) != want {
		return false
	}
	if v[0] < 'A' || v[0] > 'Z' || v[1] < 'A' || v[1] > 'Z' {
		return false
	}
	rem := 0
	for _, c := range v[4:] + v[:4] {
		switch {
		case c >= '0' && c <= '9':
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			rem = (rem*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return rem == 1
}
