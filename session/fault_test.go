package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/faultstore"
	"github.com/mementohq/memento/store/memstore"
)

func newSession(t *testing.T, svc *session.Service) session.Session {
	t.Helper()
	s, _, err := svc.Put(context.Background(), "t", "s1", session.PutRequest{UserID: "u", State: json.RawMessage(`{"n":1}`), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A patch whose write is applied but whose answer is lost: re-reading
// settles it (the patch is there, once), and a retry under the same
// revision is refused instead of applied again.
func TestPatchAnswerLost(t *testing.T) {
	mem := memstore.New()
	in := faultstore.New(1, faultstore.Rule{Method: "SetState", Action: faultstore.Lose, Times: 1})
	svc := session.NewService(in.Sessions(mem), session.Options{})
	ctx := context.Background()
	s := newSession(t, svc)
	if _, err := svc.Patch(ctx, "t", "s1", "u", s.Revision, json.RawMessage(`{"items":["a"]}`)); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("patch: %v, want the lost answer", err)
	}
	got, err := svc.Get(ctx, "t", "s1", "u")
	if err != nil || got.Revision != s.Revision+1 || !strings.Contains(string(got.State), `"items":["a"]`) {
		t.Fatalf("after the lost answer: %+v %v; want the patch applied once", got, err)
	}
	if _, err := svc.Patch(ctx, "t", "s1", "u", s.Revision, json.RawMessage(`{"items":["a"]}`)); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("retry under the old revision: %v, want ErrPreconditionFailed", err)
	}
	if again, _ := svc.Get(ctx, "t", "s1", "u"); again.Revision != got.Revision {
		t.Fatalf("the refused retry changed the session: revision %d", again.Revision)
	}
}

// The vault write fails while messages carrying personal data are appended:
// the append fails and nothing is stored, so the raw value never reaches the
// message log.
func TestAppendWhenTheVaultFails(t *testing.T) {
	mem := memstore.New()
	in := faultstore.New(1, faultstore.Rule{Method: "PutRecords", Action: faultstore.Fail, Times: 1})
	vault, err := pii.NewVault(in.Vault(mem), pii.VaultOptions{Key: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	svc := session.NewService(in.Sessions(mem), session.Options{Redactor: vault})
	ctx := context.Background()
	newSession(t, svc)
	msg := []session.MessageInput{{Role: "user", Content: "write to ann@example.org"}}
	if _, err := svc.Append(ctx, "t", "s1", "u", msg); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("append: %v, want the vault's failure", err)
	}
	if ms, _ := svc.Messages(ctx, "t", "s1", "u", session.MessageQuery{Limit: 10}); len(ms) != 0 {
		t.Fatalf("a failed append stored %+v", ms)
	}
	if in.Calls("Append") != 0 {
		t.Fatalf("the store's append ran %d times after the vault failed", in.Calls("Append"))
	}
	res, err := svc.Append(ctx, "t", "s1", "u", msg)
	if err != nil || len(res.Messages) != 1 || strings.Contains(res.Messages[0].Content, "ann@example.org") {
		t.Fatalf("retry: %+v %v; want one message with the address replaced", res, err)
	}
}
