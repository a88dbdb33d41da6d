package pii

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	cases := []struct {
		in   string
		want map[Kind][]string
	}{
		{"mail me at jane.doe+x@example.co.uk please", map[Kind][]string{KindEmail: {"jane.doe+x@example.co.uk"}}},
		{"card 4111 1111 1111 1111 exp 12/29", map[Kind][]string{KindCard: {"4111 1111 1111 1111"}}},
		{"card 4111-1111-1111-1111.", map[Kind][]string{KindCard: {"4111-1111-1111-1111"}}},
		{"card 4111111111111112 fails luhn", nil},
		{"order 1234567890123 is on its way", nil},
		{"iban DE89 3704 0044 0532 0130 00 thanks", map[Kind][]string{KindIBAN: {"DE89 3704 0044 0532 0130 00"}}},
		{"iban GB82WEST12345698765432", map[Kind][]string{KindIBAN: {"GB82WEST12345698765432"}}},
		{"iban GB82WEST12345698765433 bad check", nil},
		{"call +33 6 12 34 56 78 now", map[Kind][]string{KindPhone: {"+33 6 12 34 56 78"}}},
		{"call (555) 123-4567", map[Kind][]string{KindPhone: {"(555) 123-4567"}}},
		{"call 555-123-4567", map[Kind][]string{KindPhone: {"555-123-4567"}}},
		{"tel 06 12 34 56 78", map[Kind][]string{KindPhone: {"06 12 34 56 78"}}},
		{"born 01.02.2024 at 10:30, total 12.50", nil},
		{"order #A-1042, 3 items, 2024-05-01", nil},
		{"ref pii:card:abcdefghijklmnopqrstuvwxyz stays", nil},
		{"two: a@b.io and 5500 0000 0000 0004", map[Kind][]string{KindEmail: {"a@b.io"}, KindCard: {"5500 0000 0000 0004"}}},
		// Formats a user writes every day that slipped through before.
		{"ann.o'neil+tag@sub.example.co.uk wrote", map[Kind][]string{KindEmail: {"ann.o'neil+tag@sub.example.co.uk"}}},
		{"'ann@example.com' in quotes", map[Kind][]string{KindEmail: {"ann@example.com"}}},
		{"mail jörg@exämple.de now", map[Kind][]string{KindEmail: {"jörg@exämple.de"}}},
		{"call 0047 912 34 567", map[Kind][]string{KindPhone: {"0047 912 34 567"}}},
		{"call 020 7946 0958 today", map[Kind][]string{KindPhone: {"020 7946 0958"}}},
		{"call 1 415 555 0132", map[Kind][]string{KindPhone: {"1 415 555 0132"}}},
		{"call 415 555 0132", map[Kind][]string{KindPhone: {"415 555 0132"}}},
		{"card 4111.1111.1111.1111", map[Kind][]string{KindCard: {"4111.1111.1111.1111"}}},
		{"card 4111\u00a01111\u00a01111\u00a01111", map[Kind][]string{KindCard: {"4111\u00a01111\u00a01111\u00a01111"}}},
		{"pi is 3.14159265358979 and e 2.718281828459045", nil},
	}
	for _, c := range cases {
		got := map[Kind][]string{}
		for _, f := range Detect(c.in, AllKinds) {
			if c.in[f.Start:f.End] != f.Value {
				t.Fatalf("%q: finding %+v does not match its span", c.in, f)
			}
			got[f.Kind] = append(got[f.Kind], f.Value)
		}
		if len(got) != len(c.want) {
			t.Errorf("%q: got %v, want %v", c.in, got, c.want)
			continue
		}
		for k, vs := range c.want {
			if strings.Join(got[k], "|") != strings.Join(vs, "|") {
				t.Errorf("%q: %s got %v, want %v", c.in, k, got[k], vs)
			}
		}
	}
}

func TestLuhnAndIBAN(t *testing.T) {
	for _, n := range []string{"4111111111111111", "5500000000000004", "340000000000009", "6011000000000004"} {
		if !Luhn(n) {
			t.Errorf("Luhn(%s) = false", n)
		}
	}
	if Luhn("4111111111111112") || Luhn("") || Luhn("41a1") {
		t.Error("Luhn accepted an invalid number")
	}
	for _, v := range []string{"DE89370400440532013000", "FR1420041010050500013M02606", "NL91ABNA0417164300", "be68 5390 0754 7034"} {
		if !ValidIBAN(v) {
			t.Errorf("ValidIBAN(%s) = false", v)
		}
	}
	for _, v := range []string{"DE89370400440532013001", "DE8937040044053201300", "XX00", "1234567890123456"} {
		if ValidIBAN(v) {
			t.Errorf("ValidIBAN(%s) = true", v)
		}
	}
}

func TestDisabledAndKinds(t *testing.T) {
	in := "a@b.io 4111 1111 1111 1111"
	if fs := NewRedactor(Options{Disabled: true}).Find(in); fs != nil {
		t.Fatalf("disabled redactor found %v", fs)
	}
	fs := NewRedactor(Options{Kinds: []Kind{KindCard}}).Find(in)
	if len(fs) != 1 || fs[0].Kind != KindCard {
		t.Fatalf("card-only redactor found %v", fs)
	}
}

func TestParseRef(t *testing.T) {
	id := newID()
	k, got, err := ParseRef(Ref(KindIBAN, id))
	if err != nil || k != KindIBAN || got != id {
		t.Fatalf("ParseRef = %v %v %v", k, got, err)
	}
	for _, bad := range []string{"", "pii:iban", "pii:x:" + id, "pii:iban:" + id + "x", " pii:iban:" + id} {
		if _, _, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) accepted", bad)
		}
	}
}

func TestLogHandlerMasks(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil), nil))
	log.With("who", "bob@example.com").Info("paid with 4111 1111 1111 1111",
		"request_id", "12345678-0612-3456-7890-123456789012",
		"iban", "DE89370400440532013000",
		slog.Group("g", "phone", "+33 6 12 34 56 78"),
		"obj", map[string]string{"email": "eve@example.org"})
	out := buf.String()
	for _, raw := range []string{"bob@example.com", "4111 1111 1111 1111", "DE89370400440532013000", "+33 6 12 34 56 78", "eve@example.org"} {
		if strings.Contains(out, raw) {
			t.Errorf("log carries %q: %s", raw, out)
		}
	}
	if !strings.Contains(out, "12345678-0612-3456-7890-123456789012") {
		t.Errorf("request_id was masked: %s", out)
	}
	if !strings.Contains(out, "[redacted:card]") || !strings.Contains(out, "[redacted:email]") {
		t.Errorf("log lacks placeholders: %s", out)
	}
}
