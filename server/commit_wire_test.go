package server_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/mementohq/memento/server"
)

// The commit answer is written without encoding/json on the usual path and
// with it otherwise; either way the bytes and headers are what
// json.Marshal and writeJSON would produce, and odd but valid bodies (escapes,
// whitespace, characters JSON escapes) decode as encoding/json decodes them.
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
			if !bytes.Equal(res.body, append(want, '\n')) {
				t.Errorf("%s: body is not what json.Marshal writes:\n got %s\nwant %s", b.name, res.body, want)
			}
			rev := int64(i + 2)
			if got.Run.StateRevision != rev || got.Event.Seq != rev || got.Run.NextStep != b.nextStep || string(got.Run.State) != b.state {
				t.Errorf("%s: decoded as %+v", b.name, got)
			}
			if res.header.Get("Content-Type") != "application/json" || res.header.Get("Content-Length") != strconv.Itoa(len(res.body)) ||
				res.header.Get("ETag") != `"`+strconv.FormatInt(rev, 10)+`"` || res.header.Get("X-Request-Id") == "" {
				t.Errorf("%s: headers %v", b.name, res.header)
			}
		}
	})
}
