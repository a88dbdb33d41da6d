package pii

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRedact checks the redactor's invariants on arbitrary text: findings are
// exact, ordered, non-overlapping spans; replacing them leaves nothing to find
// (idempotence); and a planted, separated card or e-mail never survives.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"", "hello", "a@b.io", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
		"+1 (555) 123-4567", "06.12.34.56.78", "x@y.z@w.com", "pii:card:abcdefghijklmnopqrstuvwxyz",
		"\xff\xfe a@b.io \x00", "GB82WEST12345698765432GB82WEST12345698765432",
	} {
		f.Add(s, "4111111111111111")
	}
	red := NewRedactor(Options{})
	f.Fuzz(func(t *testing.T, s, plant string) {
		fs := red.Find(s)
		last := 0
		for _, fd := range fs {
			if fd.Start < last || fd.End <= fd.Start || fd.End > len(s) || s[fd.Start:fd.End] != fd.Value {
				t.Fatalf("bad finding %+v in %q", fd, s)
			}
			last = fd.End
		}
		out := Replace(s, fs, func(fd Finding) string { return Ref(fd.Kind, newID()) })
		if len(fs) == 0 && out != s {
			t.Fatalf("no findings but text changed: %q -> %q", s, out)
		}
		if again := red.Find(out); len(again) != 0 {
			t.Fatalf("redacted text still has %+v: %q -> %q", again, s, out)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("redaction broke UTF-8: %q -> %q", s, out)
		}

		// A Luhn-valid card made from the fuzzer's digits, set apart by spaces.
		digits := digitsOf(plant)
		if len(digits) >= 12 {
			digits = digits[:min(len(digits), 15)]
			if len(digits) < 15 {
				digits += strings.Repeat("7", 15-len(digits))
			}
			card := withLuhnDigit(digits)
			if strings.Count(card, card[:1]) != len(card) {
				text := s + " " + card + " " + s
				got := Replace(text, red.Find(text), func(fd Finding) string { return Ref(fd.Kind, newID()) })
				if strings.Contains(got, card) {
					t.Fatalf("card %s survived in %q", card, got)
				}
			}
		}
		email := "user" + digitsOf(plant) + "@example.com"
		text := s + " " + email + " " + s
		got := Replace(text, red.Find(text), func(fd Finding) string { return Ref(fd.Kind, newID()) })
		if strings.Contains(got, email) {
			t.Fatalf("e-mail survived in %q", got)
		}
	})
}

func withLuhnDigit(d string) string {
	for c := byte('0'); c <= '9'; c++ {
		if Luhn(d + string(c)) {
			return d + string(c)
		}
	}
	panic("unreachable")
}

// FuzzCleanJSON checks the JSON screen is conservative: when it calls a
// JSON text clean, no string of it (keys included) holds anything to find.
func FuzzCleanJSON(f *testing.F) {
	for _, s := range []string{
		`{"turn":7,"lang":"en"}`, `{"mail":"a@b.io"}`, `{"a@b.io":1}`, `{"card":"4111 1111 1111 1111"}`,
		`{"d":"2025-12-20"}`, `{"e":"a\u0040b.io"}`, `["x",{"y":"+33 6 12 34 56 78"}]`, `"unterminated 4111`,
	} {
		f.Add(s)
	}
	red := NewRedactor(Options{})
	f.Fuzz(func(t *testing.T, s string) {
		var v any
		if !red.CleanJSON([]byte(s)) || json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if fs := red.Find(x); len(fs) != 0 {
					t.Fatalf("CleanJSON(%q) but %q holds %+v", s, x, fs)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}

func TestCleanJSON(t *testing.T) {
	red := NewRedactor(Options{})
	for s, want := range map[string]bool{
		`{"turn":7,"lang":"en","n":123456789012}`:     true,  // a number too short to be a card number
		`{"turn":7,"lang":"en","n":4111111111111111}`: false, // a number may be a card number
		`{"step":"step-123"}`:                         true,
		`{"d":"2025-12-20"}`:                          false,
		`{"mail":"a@b.io"}`:                           false,
		`{"a\u0040b.io":1}`:                           false,
		`{"x":"unterminated 4111 1111`:                false,
	} {
		if got := red.CleanJSON([]byte(s)); got != want {
			t.Errorf("CleanJSON(%s) = %v, want %v", s, got, want)
		}
	}
	if !NewRedactor(Options{Disabled: true}).CleanJSON([]byte(`{"mail":"a@b.io"}`)) {
		t.Error("a disabled redactor changes nothing, so everything is clean to it")
	}
	if !NewRedactor(Options{Kinds: []Kind{KindEmail}}).CleanJSON([]byte(`{"d":"2025-12-20 4111 1111"}`)) {
		t.Error("digits matter only to kinds that need them")
	}
}
