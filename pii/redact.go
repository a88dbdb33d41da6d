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
