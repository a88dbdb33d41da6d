package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mementohq/memento/server"
)

// The commit answer is written with json v2: the same members in the same
// order with the same values as json.Marshal writes (strings may be escaped
// differently: no HTML escaping), the headers writeJSON sets, and odd but
// valid bodies (escapes, whitespace, characters JSON escapes) decode as
// encoding/json decodes them.
func TestCommitWireFormat(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		r, l := e.leasedRun(t, "wire")
		lease, _ := json.Marshal(l)
		bodies := []struct{ name, body, nextStep, state string }{
			{"plain", `{"expected_revision":1,"lease":` + string(lease) + `,"event":{"event_type":"a","step_id":"s1","attempt":1,"payload":{"n":1}},"state":{"k":"two words"},"next_step":"b"}`,
				"b", `{"k":"two words"}`},
			{"spaced", "{ \"expected_revision\" : 2 ,\n \"lease\" : " + string(lease) + ", \"event\": {\"event_type\": \"a\"}, \"state\": { \"k\" : [ 1 , 2 ] }, \"next_step\": \"c\" }",
				"c", `{"k":[1,2]}`},
			{"escapes", `{"expected_revision":3,"lease":` + string(lease) + `,"event":{"event_type":"a"},"state":{"k":"\u00e9"},"next_step":"d\u0065"}`,
				"de", `{"k":"\u00e9"}`},
			{"html", `{"expected_revision":4,"lease":` + string(lease) + `,"event":{"event_type":"a","payload":"<b>&"},"state":{"k":"<i>"},"next_step":"f"}`,
				"f", `{"k":"\u003ci\u003e"}`},
		}
		for i, b := range bodies {
			res := e.do(t, "POST", "/v1/runs/"+r.RunID+"/commit", b.body, nil)
			if res.status != 200 {
				t.Fatalf("%s: status %d: %s", b.name, res.status, res.body)
			}
			var got server.CommitResponse
			if err := json.Unmarshal(res.body, &got); err != nil {
				t.Fatalf("%s: %v: %s", b.name, err, res.body)
			}
			want, _ := json.Marshal(got)
			if g, w := jsonTokens(t, res.body), jsonTokens(t, want); g != w || !bytes.HasSuffix(res.body, []byte("}\n")) {
				t.Errorf("%s: body is not what json.Marshal writes:\n got %s\nwant %s", b.name, res.body, want)
			}
			if bytes.Contains(res.body, []byte(`\u003c`)) || bytes.Contains(res.body, []byte(`\u0026`)) {
				t.Errorf("%s: the answer is HTML-escaped: %s", b.name, res.body)
			}
			rev := int64(i + 2)
			if got.Run.StateRevision != rev || got.Event.Seq != rev || got.Run.NextStep != b.nextStep || jsonTokens(t, got.Run.State) != jsonTokens(t, []byte(b.state)) {
				t.Errorf("%s: decoded as %+v", b.name, got)
			}
			if res.header.Get("Content-Type") != "application/json" || res.header.Get("Content-Length") != strconv.Itoa(len(res.body)) ||
				res.header.Get("ETag") != `"`+strconv.FormatInt(rev, 10)+`"` || res.header.Get("X-Request-Id") == "" {
				t.Errorf("%s: headers %v", b.name, res.header)
			}
		}
	})
}

// jsonTokens is b as a sequence of tokens, strings unescaped: equal for two
// texts with the same members in the same order and the same values.
func jsonTokens(t *testing.T, b []byte) string {
	t.Helper()
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	var out strings.Builder
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return out.String()
		}
		if err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		out.WriteString(tok.Kind().String() + ":" + tok.String() + "\n")
	}
}
