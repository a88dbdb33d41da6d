package memento_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/session"
)

// TestEmbeddedSessionsAndVaultKey: the embedded engine wires sessions with
// redaction on, generates a private vault key once and reuses it, so a
// reference still resolves after a restart.
func TestEmbeddedSessionsAndVaultKey(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	eng, err := memento.Open(ctx, memento.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if eng.SessionBackend() != memento.BackendSQLite || !eng.Vault.Encrypted() {
		t.Fatalf("backend %s, encrypted %v", eng.SessionBackend(), eng.Vault.Encrypted())
	}
	if _, _, err := eng.Sessions.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: []byte(`{"email":"ann@example.org"}`)}); err != nil {
		t.Fatalf("put: %v", err)
	}
	s, err := eng.Sessions.Get(ctx, "t", "s", "u")
	if err != nil || strings.Contains(string(s.State), "ann@example.org") {
		t.Fatalf("get: %s %v", s.State, err)
	}
	ref := string(s.State)[strings.Index(string(s.State), "pii:") : strings.Index(string(s.State), "pii:")+len("pii:email:")+26]
	fi, err := os.Stat(filepath.Join(dir, memento.PIIKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if err := eng.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	eng, err = memento.Open(ctx, memento.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer eng.Close()
	r, err := eng.Vault.Resolve(ctx, "t", ref)
	if err != nil || r.Value != "ann@example.org" {
		t.Fatalf("resolve after restart: %+v %v", r, err)
	}
}

func TestSessionsRedactionDisabled(t *testing.T) {
	eng, err := memento.Open(context.Background(), memento.Config{DataDir: t.TempDir(), PII: memento.PIIConfig{Disabled: true}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer eng.Close()
	s, _, err := eng.Sessions.Put(context.Background(), "t", "s", session.PutRequest{UserID: "u", State: []byte(`{"email":"ann@example.org"}`)})
	if err != nil || !strings.Contains(string(s.State), "ann@example.org") {
		t.Fatalf("with redaction off the state is kept as given: %s %v", s.State, err)
	}
}
