package pii

import (
	"strings"
)

// Options configure what the redactor looks for.
type Options struct {
	// Disabled turns redaction off; it is on unless a deployment opts out.
	Disabled bool
	// Kinds to detect; nil means all of AllKinds.
	Kinds []Kind
}

// Redactor finds personal data in text. It is safe for concurrent use.
type Redactor struct {
	kinds []Kind
	on    bool
}

// NewRedactor returns a redactor for the given options.
func NewRedactor(o Options) *Redactor {
	kinds := o.Kinds
	if kinds == nil {
		kinds = AllKinds
	}
	return &Redactor{kinds: append([]Kind(nil), kinds...), on: !o.Disabled}
}

// Enabled reports whether the redactor does anything.
func (r *Redactor) Enabled() bool { return r != nil && r.on && len(r.kinds) > 0 }

// Kinds returns the kinds it detects.
func (r *Redactor) Kinds() []Kind { return append([]Kind(nil), r.kinds...) }

// Find returns the personal data in s (none when disabled).
func (r *Redactor) Find(s string) []Finding {
	if !r.Enabled() {
		return nil
	}
	return Detect(s, r.kinds)
}

// CleanJSON reports whether no string of the JSON text b (object keys
// included) can hold personal data of the redactor's kinds, so redacting
// its strings would change nothing. It is a cheap, conservative screen: a
// string with an escape, an '@' or enough digits for any kind makes it
// false. b need not be valid JSON; validity is the caller's business.
func (r *Redactor) CleanJSON(b []byte) bool {
	if !r.Enabled() {
		return true
	}
	in, digits, at := false, 0, false
	run := 0 // digits in a row outside strings: a number may be a card number
	for _, c := range b {
		if !in {
			switch {
			case c == '"':
				in, digits, at, run = true, 0, false, 0
			case c >= '0' && c <= '9':
				if run++; run >= 13 && r.mayHold(run, false) {
					return false
				}
			default:
				run = 0
			}
			continue
		}
		switch {
		case c == '"':
			in = false
			if r.mayHold(digits, at) {
				return false
			}
		case c == '\\':
			return false // an escape may spell a digit or an '@'
		case c >= '0' && c <= '9':
			digits++
		case c == '@':
			at = true
		}
	}
	return !in || !r.mayHold(digits, at)
}

func (r *Redactor) mayHold(digits int, at bool) bool {
	for _, k := range r.kinds {
		if mayHold(k, digits, at) {
			return true
		}
	}
	return false
}

// Replace returns s with every finding replaced by repl(finding). The
// findings must be ordered and non-overlapping, as Detect returns them.
func Replace(s string, fs []Finding, repl func(Finding) string) string {
	if len(fs) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, f := range fs {
		b.WriteString(s[last:f.Start])
		b.WriteString(repl(f))
		last = f.End
	}
	b.WriteString(s[last:])
	return b.String()
}

// Mask replaces personal data in s with a placeholder naming its kind, for
// logs and error messages where no reference is needed.
func (r *Redactor) Mask(s string) string {
	return Replace(s, r.Find(s), func(f Finding) string { return "[redacted:" + string(f.Kind) + "]" })
}
