package commitjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
)

// response is the commit response as the server and client declare it.
type response struct {
	Run   run.Run   `json:"run"`
	Event run.Event `json:"event"`
}

// stdDecodeRequest is the server's standard path: strict, one object, then EOF.
func stdDecodeRequest(b []byte) (run.CommitRequest, error) {
	var c run.CommitRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return c, errors.New("data after the object")
	}
	return c, nil
}

// fill sets every JSON field of v (a pointer to a struct) to a non-zero
// value, so that a field added to the run types shows up in the comparison.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	ts := time.Date(2025, 3, 4, 5, 6, 7, 891234000, time.UTC)
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() || sf.Tag.Get("json") == "-" {
			continue
		}
		switch {
		case f.Type() == reflect.TypeFor[json.RawMessage]():
			f.SetBytes([]byte(`{"k": [1, "two words", {"n": null}], "b": true}`))
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(ts))
		case f.Type() == reflect.TypeFor[*time.Time]():
			f.Set(reflect.ValueOf(&ts))
		case f.Kind() == reflect.String:
			f.SetString(strings.ToLower(sf.Name) + "-1")
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			f.SetInt(int64(7 + i))
		case f.Kind() == reflect.Struct:
			fill(t, f)
		default:
			t.Fatalf("fill: field %s of type %s is not handled; teach fill and the codec about it", sf.Name, f.Type())
		}
	}
}

func sampleRequest() run.CommitRequest {
	return run.CommitRequest{
		ExpectedRevision: 41,
		Lease:            run.Lease{Owner: "worker-3", Epoch: 2, ExpiresAt: time.Date(2025, 1, 2, 3, 4, 5, 600000000, time.UTC)},
		Event:            run.EventInput{EventType: "step.completed", StepID: "step-41", Attempt: 1, Payload: json.RawMessage(`{"tool":"search","ok":true,"n":41}`)},
		State:            json.RawMessage(`{"step":41,"budget":{"tokens":12000,"usd":0.42},"notes":"benchmark state"}`),
		NextStep:         "step-42",
	}
}

func sampleResponse() response {
	exp := time.Date(2025, 1, 2, 3, 4, 35, 123456789, time.UTC)
	created := time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC)
	updated := time.Date(2025, 1, 2, 3, 4, 5, 987654000, time.UTC)
	return response{
		Run: run.Run{
			TenantID: "default", RunID: "run-1", WorkflowName: "bench", WorkflowVersion: "1",
			StateSchemaVersion: 1, Status: run.StatusRunning, NextStep: "step-42",
			State: json.RawMessage(`{"step":41, "notes": "benchmark state"}`), StateRevision: 42,
			LeaseOwner: "worker-3", LeaseEpoch: 2, LeaseExpiresAt: &exp, CreatedAt: created, UpdatedAt: updated,
		},
		Event: run.Event{Seq: 42, EventType: "step.completed", StepID: "step-41", Attempt: 1,
			Payload: json.RawMessage(`{"tool":"search"}`), CreatedAt: updated},
	}
}

func TestAppendRequestMatchesMarshal(t *testing.T) {
	full := run.CommitRequest{}
	fill(t, reflect.ValueOf(&full).Elem())
	cases := map[string]run.CommitRequest{
		"sample": sampleRequest(),
		"full":   full,
		"zero":   {State: json.RawMessage(`{}`)},
		"spaced": {State: json.RawMessage(" {\n\t\"a\" : [ 1 , 2 ] , \"s\":\"x \\\" y\" }\n"), Event: run.EventInput{EventType: "e", Payload: json.RawMessage(` "p" `)}},
	}
	for name, c := range cases {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, ok := AppendRequest(nil, &c)
		if !ok {
			t.Fatalf("%s: the fast writer refused a plain request", name)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func TestAppendResponseMatchesMarshal(t *testing.T) {
	full := response{}
	fill(t, reflect.ValueOf(&full).Elem())
	cases := map[string]response{
		"sample": sampleResponse(),
		"full":   full,
		"zero":   {},
	}
	for name, v := range cases {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, ok := AppendResponse([]byte("prefix"), &v.Run, &v.Event)
		if !ok {
			t.Fatalf("%s: the fast writer refused a plain response", name)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%s:\n got %s\nwant prefix%s", name, got, want)
		}
	}
}

// Values json.Marshal escapes or refuses are left to it.
func TestAppendLeavesTheUnusualToEncodingJSON(t *testing.T) {
	for name, mut := range map[string]func(c *run.CommitRequest){
		"html in state":      func(c *run.CommitRequest) { c.State = json.RawMessage(`{"a":"<b>"}`) },
		"ampersand in owner": func(c *run.CommitRequest) { c.Lease.Owner = "a&b" },
		"quote in step":      func(c *run.CommitRequest) { c.Event.StepID = `a"b` },
		"non-ascii reason":   func(c *run.CommitRequest) { c.StatusReason = "café" },
		"newline in reason":  func(c *run.CommitRequest) { c.StatusReason = "a\nb" },
		"u2028 in payload":   func(c *run.CommitRequest) { c.Event.Payload = json.RawMessage("\"a\u2028b\"") },
		"invalid state":      func(c *run.CommitRequest) { c.State = json.RawMessage(`{"a":}`) },
		"empty state":        func(c *run.CommitRequest) { c.State = json.RawMessage{} },
		"year 10000":         func(c *run.CommitRequest) { c.Lease.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		c := sampleRequest()
		mut(&c)
		if got, ok := AppendRequest(nil, &c); ok {
			t.Errorf("%s: written as %s; want it left to encoding/json", name, got)
		}
	}
}

func TestDecodeRequest(t *testing.T) {
	c := sampleRequest()
	body, _ := json.Marshal(c)
	spaced := []byte(" { \"expected_revision\" : 41 ,\n\"lease\":{\"owner\":\"worker-3\",\"epoch\":2,\"expires_at\":\"2025-01-02T03:04:05.6Z\"}, \"event\": {\"event_type\":\"step.completed\",\"attempt\":1, \"payload\": [1, {\"a\": \"b\\\"c\"}]},\n\"state\": {\"a\": \"x\"},\"next_step\":\"n\",\"status\":\"completed\",\"status_reason\":\"done\",\"state_schema_version\":3 }\n")
	for name, b := range map[string][]byte{"marshalled": body, "spaced": spaced, "empty object": []byte(`{}`)} {
		var got run.CommitRequest
		if !DecodeRequest(b, &got) {
			t.Fatalf("%s: the fast reader refused a plain body: %s", name, b)
		}
		want, err := stdDecodeRequest(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		assertSame(t, name, got, want)
	}

	// What the fast reader leaves alone: other spellings, escapes, null,
	// repeats, numbers that are not int64, trailing data, invalid JSON.
	for _, b := range []string{
		`{"Expected_Revision":1}`, `{"next_step":"a\u0062"}`, `{"state":null}`, `{"next_step":null}`,
		`{"next_step":"a","next_step":"b"}`, `{"expected_revision":1.0}`, `{"expected_revision":1e2}`,
		`{"expected_revision":99999999999999999999}`, `{"expected_revision":"1"}`, `{} {}`, `{"x":1}`,
		`{"state":{"a":1,}}`, `{"lease":{"expires_at":"yesterday"}}`, `{"event":{"payload":[1 2]}}`, `[]`,
		`{"state":{"a":01}}`, `{"state":"\x01"}`, "{\"next_step\":\"\xff\"}", `{"event":{"attempt":-1.5}}`,
		`{"state":{"a":tru}}`, `{"state":{"a":"\uZZZZ"}}`, `{"lease":{"owner":"o","owner":"p"}}`,
	} {
		c := sampleRequest()
		if DecodeRequest([]byte(b), &c) {
			t.Errorf("fast reader took %s", b)
		}
		if !reflect.DeepEqual(c, sampleRequest()) {
			t.Errorf("a refused body changed the destination: %s", b)
		}
	}
}

func TestDecodeResponse(t *testing.T) {
	full := response{}
	fill(t, reflect.ValueOf(&full).Elem())
	for name, v := range map[string]response{"sample": sampleResponse(), "full": full} {
		body, _ := json.Marshal(v)
		body = append(body, '\n')
		var got response
		if !DecodeResponse(body, &got.Run, &got.Event) {
			t.Fatalf("%s: the fast reader refused the server's body: %s", name, body)
		}
		var want response
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatal(err)
		}
		assertSame(t, name, got, want)
	}
	for _, b := range []string{`{"run":{"unknown":1}}`, `{"run":{"lease_expires_at":null}}`, `{"event":{"payload":null}}`, `{"run":{}} x`} {
		var got response
		if DecodeResponse([]byte(b), &got.Run, &got.Event) {
			t.Errorf("fast reader took %s", b)
		}
	}
}

// assertSame compares decoded values field by field, times by instant and offset.
func assertSame(t *testing.T, name string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
	}
}

// normalize renders a value with every time as its instant and offset, so
// that two equal fixed zones built apart compare equal.
func normalize(v any) string {
	var b strings.Builder
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch {
		case v.Type() == reflect.TypeFor[time.Time]():
			t := v.Interface().(time.Time)
			_, off := t.Zone()
			b.WriteString(t.UTC().Format(time.RFC3339Nano))
			b.WriteString("@")
			b.WriteString(time.Duration(off * int(time.Second)).String())
		case v.Kind() == reflect.Pointer:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			b.WriteString("&")
			walk(v.Elem())
		case v.Kind() == reflect.Struct:
			b.WriteString("{")
			for i := range v.NumField() {
				b.WriteString(v.Type().Field(i).Name + ":")
				walk(v.Field(i))
				b.WriteString(" ")
			}
			b.WriteString("}")
		case v.Kind() == reflect.Slice:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			fmt.Fprintf(&b, "%q", v.Bytes())
		default:
			fmt.Fprintf(&b, "%q", fmt.Sprint(v.Interface()))
		}
	}
	walk(reflect.ValueOf(v))
	return b.String()
}

// Whatever the fast reader accepts, encoding/json accepts and decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	body, _ := json.Marshal(sampleRequest())
	f.Add(body)
	f.Add([]byte(`{"expected_revision":-0,"event":{"payload":[1e5,-0.5E-3,"\u00e9\n",[],{}]},"state":{" ":false}}`))
	f.Add([]byte(`{"lease":{"expires_at":"2025-01-02T03:04:05+01:00"},"status":"completed"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got run.CommitRequest
		if !DecodeRequest(b, &got) {
			return
		}
		want, err := stdDecodeRequest(b)
		if err != nil {
			t.Fatalf("fast reader took %q, which encoding/json refuses: %v", b, err)
		}
		assertSame(t, string(b), got, want)
	})
}

// Whatever the fast reader accepts, json.Unmarshal decodes the same.
func FuzzDecodeResponse(f *testing.F) {
	body, _ := json.Marshal(sampleResponse())
	f.Add(body)
	f.Add([]byte(`{"run":{"state":{"a":[true,false,null]},"lease_expires_at":"2025-01-02T03:04:05-07:00"},"event":{"seq":-9223372036854775808}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got response
		if !DecodeResponse(b, &got.Run, &got.Event) {
			return
		}
		var want response
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("fast reader took %q, which encoding/json refuses: %v", b, err)
		}
		assertSame(t, string(b), got, want)
	})
}

// Whatever the fast writer writes, json.Marshal writes the same.
func FuzzAppendRequest(f *testing.F) {
	f.Add("worker-1", "step.completed", "s-1", `{"a":1}`, `{"b": "x y"}`, int64(3), int64(2), "completed")
	f.Add("a<b", "", "", ` [ ] `, `"\u2028"`, int64(-1), int64(0), "")
	f.Fuzz(func(t *testing.T, owner, eventType, stepID, payload, state string, rev, epoch int64, status string) {
		c := run.CommitRequest{
			ExpectedRevision: rev, Lease: run.Lease{Owner: owner, Epoch: epoch},
			Event: run.EventInput{EventType: eventType, StepID: stepID, Payload: json.RawMessage(payload)},
			State: json.RawMessage(state), NextStep: stepID, Status: run.Status(status), StatusReason: owner,
		}
		got, ok := AppendRequest(nil, &c)
		want, err := json.Marshal(c)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("fast writer wrote %s for a value json.Marshal refuses: %v", got, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// Whatever the fast writer writes, json.Marshal writes the same.
func FuzzAppendResponse(f *testing.F) {
	f.Add("run-1", `{"a": [1, 2]}`, `{}`, int64(5), "worker")
	f.Add("r>", `"\ud800"`, ` 1 `, int64(-5), "")
	f.Fuzz(func(t *testing.T, id, state, payload string, rev int64, owner string) {
		v := sampleResponse()
		v.Run.RunID, v.Run.State, v.Run.StateRevision, v.Run.LeaseOwner = id, json.RawMessage(state), rev, owner
		v.Event.Payload, v.Event.StepID = json.RawMessage(payload), owner
		got, ok := AppendResponse(nil, &v.Run, &v.Event)
		want, err := json.Marshal(v)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("fast writer wrote %s for a value json.Marshal refuses: %v", got, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkDecodeRequest(b *testing.B) {
	body, _ := json.Marshal(sampleRequest())
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var c run.CommitRequest
			if !DecodeRequest(body, &c) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := stdDecodeRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAppendResponse(b *testing.B) {
	v := sampleResponse()
	b.Run("fast", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			if _, ok := AppendResponse(buf[:0], &v.Run, &v.Event); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecodeResponse(b *testing.B) {
	v := sampleResponse()
	body, _ := json.Marshal(v)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var got response
			if !DecodeResponse(body, &got.Run, &got.Event) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var got response
			if err := json.Unmarshal(body, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAppendRequest(b *testing.B) {
	c := sampleRequest()
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, ok := AppendRequest(nil, &c); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
