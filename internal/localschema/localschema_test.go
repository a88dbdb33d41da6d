package localschema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestRefusesExternalRefs: a $ref to a file (one that exists, with a
// schema in it) or a URL fails to compile, with no sign of the file's
// content or existence; a ref into the document itself and the
// meta-schema still work.
func TestRefusesExternalRefs(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type":"string","enum":["TOPSECRET-42"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	compile := func(doc string) error {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		c := NewCompiler()
		if err := c.AddResource("memento:///t.json", v); err != nil {
			return err
		}
		_, err = c.Compile("memento:///t.json")
		return err
	}
	for _, ref := range []string{"file://" + secret, "file:///etc/passwd", "file:///nonexistent/x.json", "http://127.0.0.1:1/x.json", "https://example.com/s.json"} {
		err := compile(`{"type":"object","properties":{"a":{"$ref":"` + ref + `"}}}`)
		if err == nil {
			t.Fatalf("%s: compiled", ref)
		}
		if msg := err.Error(); strings.Contains(msg, "TOPSECRET") || strings.Contains(msg, "no such file") || strings.Contains(msg, "invalid character") {
			t.Fatalf("%s: the error tells about the file: %v", ref, err)
		}
	}
	if err := compile(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`); err != nil {
		t.Fatalf("a local ref and the meta-schema: %v", err)
	}
}
