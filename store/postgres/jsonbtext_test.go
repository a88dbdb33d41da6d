package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mementohq/memento/internal/testenv"
)

// jsonbCorpus holds inputs whose jsonb text jsonbText must reproduce, or
// refuse (ok false); PostgreSQL is the oracle.
var jsonbCorpus = []string{
	`{}`, `[]`, `{"a":{}}`, `[[]]`, `[{}, []]`, ` { "a" : [ 1 , 2 ] } `, "\t{\n\"a\"\r:1}",
	`{"b":1,"a":[1,2,{"zz":true,"y":null}],"aa":"x","a":2}`,
	`{"é":1,"e":2,"ab":3,"b":4,"":5}`, `{"a":1,"a":2,"a":3}`, `{"b":1,"a":2,"b":3}`,
	`"x\"\\\/\b\f\n\r\t\u0001\u001f\u001b\u007f é \u00e9 \ud83d\ude00 \u2028 \uFFFF"`,
	`{"k\u0041y":"\u00E9","\n":"\t"}`, `"\u0000"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`,
	`[1.50, -0, -0.0, 0.000, 100, -12.5, 12345678901234567890123, 0.1, -0.001]`,
	`1e2`, `[1E-2]`, `1.50e1`, `-0e0`, `01`, `1.`, `.5`, `-`, `+1`,
	`true`, `false`, `null`, `"s"`, `12`, `tru`, `nul`, `{"a"}`, `{"a":1,}`, `[1,]`, `{,}`,
	`{"a":1} x`, `{"a":1}}`, "\"\x01\"", "\"\xff\"", "\"\xc3\xa9\"", `{"step":3,"messages":3,"budget":{"tokens":12000,"usd":0.42},"last_tool":"search","cursor":"c-3","notes":"benchmark state"}`,
	strings.Repeat("[", 70) + strings.Repeat("]", 70), strings.Repeat("[", 60) + strings.Repeat("]", 60),
}

// pgJSONBText asks PostgreSQL for the jsonb text of each input ("" and
// false where it refuses one), one statement each so that a refusal spoils
// no other.
func pgJSONBText(t *testing.T, conn *pgx.Conn, in []string) ([]string, []bool) {
	t.Helper()
	ctx := context.Background()
	out := make([]string, len(in))
	valid := make([]bool, len(in))
	for i, s := range in {
		// Text in and out, so that no client-side JSON coding is involved.
		err := conn.QueryRow(ctx, `SELECT $1::text::jsonb::text`, s).Scan(&out[i])
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			valid[i] = true
		case errors.As(err, &pgErr):
		default:
			t.Fatalf("oracle on %q: %v", s, err)
		}
	}
	return out, valid
}

func checkJSONBText(t *testing.T, conn *pgx.Conn, in []string) {
	t.Helper()
	want, valid := pgJSONBText(t, conn, in)
	for i, s := range in {
		got, ok := jsonbText([]byte(s))
		if !ok {
			continue // left to PostgreSQL
		}
		if !valid[i] {
			t.Errorf("jsonbText(%q) = %q, but PostgreSQL refuses it", s, got)
			continue
		}
		if string(got) != want[i] {
			t.Errorf("jsonbText(%q) = %q, PostgreSQL says %q", s, got, want[i])
		}
		if text, members, ok := jsonbObject([]byte(s)); ok {
			if string(text) != want[i] {
				t.Errorf("jsonbObject(%q) = %q, PostgreSQL says %q", s, text, want[i])
			}
			for _, m := range members {
				var v any
				if json.Unmarshal(m.val, &v) != nil {
					t.Errorf("jsonbObject(%q): member %q has value %q, not JSON", s, m.key, m.val)
				}
			}
		}
	}
}

func openOracle(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var enc string
	if err := conn.QueryRow(context.Background(), `SHOW server_encoding`).Scan(&enc); err != nil || enc != "UTF8" {
		t.Fatalf("the oracle needs a UTF8 database, got %q (%v)", enc, err)
	}
	return conn
}

func TestJSONBText(t *testing.T) {
	conn := openOracle(t)
	checkJSONBText(t, conn, jsonbCorpus)
	// What must be left to PostgreSQL.
	for _, s := range []string{`1e2`, `"\u0000"`, `"\ud83d"`, `01`, strings.Repeat("[", 70) + strings.Repeat("]", 70), "\"\xff\""} {
		if got, ok := jsonbText([]byte(s)); ok {
			t.Errorf("jsonbText(%q) = %q, want it left to PostgreSQL", s, got)
		}
	}
	// Random documents: duplicate and look-alike keys, escapes, numbers.
	rng := rand.New(rand.NewPCG(7, 11))
	in := make([]string, 3000)
	for i := range in {
		in[i] = randJSON(rng, 0)
	}
	checkJSONBText(t, conn, in)
	n := 0
	for _, s := range in {
		if _, ok := jsonbText([]byte(s)); ok {
			n++
		}
	}
	if n < len(in)/2 {
		t.Errorf("only %d of %d random documents reproduced; the generator or jsonbText is off", n, len(in))
	}
}

var randKeys = []string{"a", "b", "aa", "ab", "é", "e", "", "A", "\\u0041", "k\\n", "\\\"", "zz", "步", "a\\u00e9"}

var randScalars = []string{
	"0", "-0", "-0.00", "1", "-1", "3.14", "1.50", "100", "12345678901234567890", "0.001", "1e3", "true", "false", "null",
	`""`, `"x"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\t\n\\\/"`, `"\u001f"`, `"é"`, `"\u2028"`, `"a\"b"`, `"\u0000"`,
}

func randJSON(rng *rand.Rand, depth int) string {
	ws := func() string { return [...]string{"", "", " ", "\n ", "\t"}[rng.IntN(5)] }
	if depth > 3 || rng.IntN(3) == 0 {
		return randScalars[rng.IntN(len(randScalars))]
	}
	var b strings.Builder
	n := rng.IntN(5)
	if rng.IntN(2) == 0 {
		b.WriteString("[" + ws())
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(randJSON(rng, depth+1))
		}
		b.WriteString(ws() + "]")
		return b.String()
	}
	b.WriteString("{" + ws())
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(ws() + "," + ws())
		}
		b.WriteString(`"` + randKeys[rng.IntN(len(randKeys))] + `"` + ws() + ":" + ws())
		b.WriteString(randJSON(rng, depth+1))
	}
	b.WriteString(ws() + "}")
	return b.String()
}

func FuzzJSONBText(f *testing.F) {
	for _, s := range jsonbCorpus {
		f.Add(s)
	}
	conn := openOracle(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkJSONBText(t, conn, []string{s})
	})
}
