package run

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var allStatuses = []Status{StatusRunning, StatusSuspended, StatusCompleted, StatusFailed, StatusCancelled}

func TestTransitions(t *testing.T) {
	allowed := map[[2]Status]bool{}
	for _, p := range [][2]Status{
		{StatusRunning, StatusRunning}, {StatusRunning, StatusSuspended}, {StatusRunning, StatusCompleted},
		{StatusRunning, StatusFailed}, {StatusRunning, StatusCancelled},
		{StatusSuspended, StatusSuspended}, {StatusSuspended, StatusRunning}, {StatusSuspended, StatusFailed},
		{StatusSuspended, StatusCancelled},
	} {
		allowed[p] = true
	}
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			if got := CanTransition(from, to); got != allowed[[2]Status{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
		if from.Terminal() != (from == StatusCompleted || from == StatusFailed || from == StatusCancelled) {
			t.Errorf("%s.Terminal() = %v", from, from.Terminal())
		}
		if !ValidStatus(from) {
			t.Errorf("ValidStatus(%s) = false", from)
		}
	}
	if ValidStatus("paused") || ValidStatus("") {
		t.Errorf("unknown statuses are valid")
	}
	if CanTransition("paused", StatusRunning) {
		t.Errorf("an unknown status can transition")
	}
	if got := AllowedFrom(StatusCompleted); !slices.Equal(got, []Status{StatusRunning}) {
		t.Errorf("AllowedFrom(completed) = %v, want [running]", got)
	}
	if got := AllowedFrom(StatusRunning); !slices.Equal(got, []Status{StatusRunning, StatusSuspended}) {
		t.Errorf("AllowedFrom(running) = %v", got)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 30, 45, 123456789, time.FixedZone("x", 3600))
	for _, id := range []string{"r1", "0195-uuid-like", "ünïcode", `quote"and\back`} {
		c := EncodeCursor(at, id)
		if strings.ContainsAny(c, "+/=") {
			t.Fatalf("cursor %q is not URL-safe", c)
		}
		gotT, gotID, err := DecodeCursor(c)
		if err != nil {
			t.Fatalf("decode %q: %v", c, err)
		}
		if gotID != id || !gotT.Equal(at.Truncate(time.Microsecond)) || gotT.Location() != time.UTC {
			t.Fatalf("round trip: %v %q, want %v %q in UTC", gotT, gotID, at.Truncate(time.Microsecond), id)
		}
	}
	for _, bad := range []string{
		"not base64!",
		base64.RawURLEncoding.EncodeToString([]byte("not json")),
		base64.RawURLEncoding.EncodeToString([]byte(`{"c":1}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"c":"x","r":"id"}`)),
	} {
		if _, _, err := DecodeCursor(bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("DecodeCursor(%q) = %v, want ErrInvalidInput", bad, err)
		}
	}
}

func TestDigestCanonical(t *testing.T) {
	a := Digest(json.RawMessage(`{"b":1,"a":{"y":[1,2],"x":"s"}}`))
	b := Digest(json.RawMessage(" {\n \"a\" : {\"x\":\"s\",\"y\":[1, 2]}, \"b\":1 }"))
	if a != b {
		t.Fatalf("key order or spacing changes the digest: %s vs %s", a, b)
	}
	if !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Fatalf("digest %q is not sha256:<64 hex>", a)
	}
	for _, other := range []string{
		`{"b":1,"a":{"y":[2,1],"x":"s"}}`, // array order matters
		`{"b":"1","a":{"y":[1,2],"x":"s"}}`,
		`{"b":1,"a":{"y":[1,2],"x":"s"},"c":null}`,
	} {
		if Digest(json.RawMessage(other)) == a {
			t.Errorf("%s has the same digest as the original", other)
		}
	}
	// Numbers keep their exact text: no float64 rounding.
	if Digest(json.RawMessage(`{"n":9007199254740993}`)) == Digest(json.RawMessage(`{"n":9007199254740992}`)) {
		t.Errorf("big integers collide after float rounding")
	}
	// Not JSON: digested as bytes, no panic, still deterministic.
	if Digest(json.RawMessage(`{oops`)) != Digest(json.RawMessage(`{oops`)) {
		t.Errorf("digest of invalid JSON is not deterministic")
	}
}

func TestRegistryCheckPath(t *testing.T) {
	r := NewRegistry()
	id := func(s json.RawMessage) (json.RawMessage, error) { return s, nil }
	if got, err := r.CheckPath("unknown", 7); err != nil || got != 7 {
		t.Fatalf("unknown workflow: %d %v, want 7 and no error", got, err)
	}
	r.SetCurrent("wf", 4)
	r.RegisterMigration("wf", 1, id)
	r.RegisterMigration("wf", 3, id)
	for _, c := range []struct {
		from   int
		target int
		err    error
	}{
		{4, 4, nil},
		{3, 4, nil},
		{2, 0, ErrNoMigrationPath}, // no 2 -> 3
		{1, 0, ErrNoMigrationPath},
		{5, 0, ErrNoMigrationPath}, // newer than the code
	} {
		got, err := r.CheckPath("wf", c.from)
		if !errors.Is(err, c.err) || (c.err == nil && got != c.target) {
			t.Errorf("CheckPath(wf, %d) = %d, %v; want %d, %v", c.from, got, err, c.target, c.err)
		}
	}
	r.RegisterMigration("wf", 2, id)
	if got, err := r.CheckPath("wf", 1); err != nil || got != 4 {
		t.Errorf("CheckPath after filling the gap: %d %v", got, err)
	}
}

func TestRegistryMigrate(t *testing.T) {
	r := NewRegistry()
	r.SetCurrent("wf", 3)
	if err := r.RegisterSchema("wf", 2, []byte(`{"type":"object","required":["v2"]}`)); err != nil {
		t.Fatalf("schema: %v", err)
	}
	r.RegisterMigration("wf", 1, func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"v2":true}`), nil })
	r.RegisterMigration("wf", 2, func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"v3":true}`), nil })
	state, steps, err := r.Migrate("wf", 1, json.RawMessage(`{"v1":true}`))
	if err != nil || string(state) != `{"v3":true}` || len(steps) != 2 {
		t.Fatalf("migrate: %s %+v %v", state, steps, err)
	}
	if steps[0].DigestAfter != steps[1].DigestBefore || steps[0].DigestBefore != Digest(json.RawMessage(`{"v1":true}`)) {
		t.Fatalf("step digests do not chain: %+v", steps)
	}

	bad := NewRegistry()
	bad.SetCurrent("wf", 2)
	if err := bad.RegisterSchema("wf", 2, []byte(`{"type":"object","required":["v2"]}`)); err != nil {
		t.Fatalf("schema: %v", err)
	}
	bad.RegisterMigration("wf", 1, func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"nope":1}`), nil })
	if _, _, err := bad.Migrate("wf", 1, json.RawMessage(`{}`)); !errors.Is(err, ErrSchemaValidation) {
		t.Fatalf("invalid output: %v, want ErrSchemaValidation", err)
	}
	bad.RegisterMigration("wf", 1, func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`[1]`), nil })
	if _, _, err := bad.Migrate("wf", 1, json.RawMessage(`{}`)); !errors.Is(err, ErrSchemaValidation) {
		t.Fatalf("non-object output: %v, want ErrSchemaValidation", err)
	}
	boom := errors.New("boom")
	bad.RegisterMigration("wf", 1, func(json.RawMessage) (json.RawMessage, error) { return nil, boom })
	if _, _, err := bad.Migrate("wf", 1, json.RawMessage(`{}`)); !errors.Is(err, boom) {
		t.Fatalf("failing migration: %v, want it wrapped", err)
	}
}

func TestValidID(t *testing.T) {
	for _, ok := range []string{"a", "run-1", "ünï", "...", ".a", strings.Repeat("x", MaxIDLength)} {
		if err := ValidID("id", ok); err != nil {
			t.Errorf("ValidID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a b", "a/b", "a?b", "a#b", "a%b", "a\nb", "a\x7fb", strings.Repeat("x", MaxIDLength+1), "\xff\xfe"} {
		if err := ValidID("id", bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ValidID(%q) = %v, want ErrInvalidInput", bad, err)
		}
	}
}

func TestValidateCommit(t *testing.T) {
	s := NewService(nil, Options{MaxStateBytes: 64})
	good := CommitRequest{ExpectedRevision: 1, Lease: Lease{Owner: "w", Epoch: 1}, Event: EventInput{EventType: "step"}, State: json.RawMessage(`{}`)}
	sc, err := s.validateCommit(good)
	if err != nil {
		t.Fatalf("valid commit: %v", err)
	}
	if string(sc.Event.Payload) != `{}` || !slices.Equal(sc.FromStatuses, []Status{StatusRunning, StatusSuspended}) {
		t.Fatalf("defaults: payload %s from %v", sc.Event.Payload, sc.FromStatuses)
	}
	done := good
	done.Status = StatusCompleted
	if sc, err := s.validateCommit(done); err != nil || !slices.Equal(sc.FromStatuses, []Status{StatusRunning}) {
		t.Fatalf("commit to completed: from %v, %v", sc.FromStatuses, err)
	}
	for name, c := range map[string]struct {
		mut  func(*CommitRequest)
		want error
	}{
		"revision 0":       {func(c *CommitRequest) { c.ExpectedRevision = 0 }, ErrInvalidInput},
		"no owner":         {func(c *CommitRequest) { c.Lease.Owner = "" }, ErrInvalidInput},
		"epoch 0":          {func(c *CommitRequest) { c.Lease.Epoch = 0 }, ErrInvalidInput},
		"reserved type":    {func(c *CommitRequest) { c.Event.EventType = "run.created" }, ErrInvalidInput},
		"no state":         {func(c *CommitRequest) { c.State = nil }, ErrInvalidInput},
		"array state":      {func(c *CommitRequest) { c.State = json.RawMessage(`[]`) }, ErrInvalidInput},
		"bad payload":      {func(c *CommitRequest) { c.Event.Payload = json.RawMessage(`{`) }, ErrInvalidInput},
		"unknown status":   {func(c *CommitRequest) { c.Status = "paused" }, ErrInvalidInput},
		"negative attempt": {func(c *CommitRequest) { c.Event.Attempt = -1 }, ErrInvalidInput},
		"big state":        {func(c *CommitRequest) { c.State = json.RawMessage(`{"x":"` + strings.Repeat("y", 64) + `"}`) }, ErrStateTooLarge},
		"big payload":      {func(c *CommitRequest) { c.Event.Payload = json.RawMessage(`"` + strings.Repeat("y", 64) + `"`) }, ErrStateTooLarge},
	} {
		req := good
		c.mut(&req)
		if _, err := s.validateCommit(req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
