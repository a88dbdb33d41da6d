package retrieval

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitOverlapAndUTF8(t *testing.T) {
	text := strings.Repeat("Ünïcödé wörds and emoji 🎉 make tokens split bytes. ", 120)
	parts, err := Split(text, 50, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 5 {
		t.Fatalf("%d chunks, want several", len(parts))
	}
	for i, p := range parts {
		if !utf8.ValidString(p) || !strings.Contains(text, p) {
			t.Fatalf("chunk %d is not a valid substring: %q", i, p)
		}
		if i > 0 && !strings.HasSuffix(parts[i-1], p[:min(len(p), 8)]) && !strings.Contains(parts[i-1], p[:min(len(p), 8)]) {
			t.Fatalf("chunk %d does not overlap the previous one", i)
		}
	}
	if !strings.HasPrefix(text, parts[0]) || !strings.HasSuffix(text, parts[len(parts)-1]) {
		t.Fatal("chunks do not cover the text's ends")
	}
	if _, err := Split("x", 10, 10); err == nil {
		t.Fatal("overlap >= size accepted")
	}
	d := Document{DocumentID: "doc", Version: 7, Content: "short text"}
	cs, err := Chunks(d, 200, 40)
	if err != nil || len(cs) != 1 || cs[0].ChunkID != "doc:p7:c0" || cs[0].Digest != Digest("short text") {
		t.Fatalf("chunks %+v %v", cs, err)
	}
}

func TestNormalizeACL(t *testing.T) {
	acl, err := NormalizeACL([]string{"user:b", "tenant", "group:x", "user:b"})
	if err != nil || strings.Join(acl, ",") != "group:x,tenant,user:b" {
		t.Fatalf("%v %v", acl, err)
	}
	for _, bad := range [][]string{nil, {""}, {"group:"}, {"a\x00b"}, {"*"}, {"Everyone"}, {"user:"}, {"tenant", "public"}} {
		if _, err := NormalizeACL(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	if !Readable([]string{"group:x"}, Entries("user:a", []string{"x"})) || Readable([]string{"user:b"}, Entries("user:a", nil)) {
		t.Fatal("Readable")
	}
}
