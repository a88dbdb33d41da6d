package jsoncheck

import (
	"errors"
	"strings"
	"testing"
)

// TestCheck: each refused text gets the right kind; good texts pass.
func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat(`[`, n) + strings.Repeat(`]`, n) }
	for doc, want := range map[string]Kind{
		`{"a":1}`:                 0,
		``:                        0,
		deep(MaxDepth):            0,
		`{"a":"\\u0000"}`:         0, // an escaped backslash, then text
		`{"a":"\ud83d\ude00 ok"}`: 0,
		`{"a":1e300,"b":-0,"c":1E-300,"d":0e999999,"e":123456789012345678901234567890}`: 0,
		`{"a":1e400}`:         Text,
		`{"a":[1,-1e200000]}`: Text,
		`{"a":1.5e-400}`:      Text,
		`{"a":1` + strings.Repeat("0", 400) + `}`: Text,
		deep(MaxDepth + 1):                        Depth,
		deep(10000):                               Depth,
		`{"a":"\u0000"}`:                          Text,
		`{"a\u0000":1}`:                           Text,
		`{"a":"\ud800"}`:                          Text,
		"{\"a\":\"\xff\"}":                        Text,
		"{\"\xc3\":1}":                            Text,
		`{"a":1,"a":2}`:                           Syntax,
		`{"a":1}}`:                                Syntax,
		`{"a":1} {}`:                              Syntax,
		`{"a":`:                                   Syntax,
		`{a:1}`:                                   Syntax,
	} {
		err := Check([]byte(doc), MaxDepth)
		var e *Error
		switch {
		case want == 0 && err != nil:
			t.Errorf("Check(%.40q) = %v, want nil", doc, err)
		case want != 0 && (!errors.As(err, &e) || e.Kind != want):
			t.Errorf("Check(%.40q) = %v, want kind %d", doc, err, want)
		}
	}
}
